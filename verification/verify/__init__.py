"""`slotwarden verify`: the main job's stages, run and report."""
