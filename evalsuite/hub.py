"""Fetching weights from the Hugging Face Hub through timm, failing fast when it is unreachable.

huggingface_hub retries a failed lookup for about half a minute; when the hub's host does not
even resolve or connect we switch it to offline mode for the call, so locally cached weights
still load and anything else fails at once with a message saying what to do instead.
"""

import contextlib
import os
import socket
from urllib.parse import urlparse

from evalsuite.errors import EvalsuiteError

_PROBE_TIMEOUT_S = 3.0


def hub_reachable(timeout_s: float = _PROBE_TIMEOUT_S) -> bool:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = urlparse(endpoint).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _offline_if_unreachable():
    from huggingface_hub import constants

    previous = constants.HF_HUB_OFFLINE
    if not previous and not hub_reachable():
        constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = previous


def create_from_hub(name: str, **kwargs):
    """timm.create_model with pretrained weights from the hub, or a one-line error."""
    import timm

    try:
        with _offline_if_unreachable():
            return timm.create_model(name, pretrained=True, **kwargs)
    except Exception as exc:  # noqa: BLE001 - hub, network and auth errors all need the same advice
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise EvalsuiteError(
            f"could not fetch pretrained weights for '{name}' from the Hugging Face Hub ({reason}); "
            "when offline, pass a timm architecture name with --weights /path/to/weights.safetensors, "
            "or --random-init for a baseline"
        ) from None
