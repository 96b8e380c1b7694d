"""`slotwarden check-trace`: an engine's slot-event trace replayed on the model, streaming."""
