import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--proofs",
        action="store_true",
        help="also confirm every CrossHair proof over all paths (minutes; `slotwarden verify` runs them too)",
    )


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        has_cuda = False
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_proof = pytest.mark.skip(reason="confirmed by `slotwarden verify`; run with --proofs")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)
        if "proof" in item.keywords and not config.getoption("--proofs"):
            item.add_marker(skip_proof)
