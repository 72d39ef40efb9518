"""Fetching weights from the Hugging Face Hub, failing fast when it is unreachable.

huggingface_hub retries a failed lookup for about half a minute; when the hub's host does not
even resolve or connect we switch it to offline mode for the call, so locally cached weights
still load and anything else fails at once with a one-line message saying what to do instead:
the model, its hub id, `--weights` with a local copy, and for gated models `HF_TOKEN`.
"""

import contextlib
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from evalsuite.errors import EvalsuiteError

_PROBE_TIMEOUT_S = 3.0
# Checkpoint files a hub repository may hold, safetensors first (no pickle, memory-mapped).
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def hub_reachable(timeout_s: float = _PROBE_TIMEOUT_S) -> bool:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _offline_if_unreachable():
    """Yields why the hub is offline ("" when online) and keeps huggingface_hub offline meanwhile."""
    from huggingface_hub import constants

    previous = constants.HF_HUB_OFFLINE
    reason = "HF_HUB_OFFLINE is set" if previous else ""
    if not previous and not hub_reachable():
        constants.HF_HUB_OFFLINE = True
        reason = "the hub is unreachable"
    try:
        yield reason
    finally:
        constants.HF_HUB_OFFLINE = previous


def download_weights(model_name: str, hub_id: str, gated: bool | None, filenames: tuple = _WEIGHT_FILES) -> Path:
    """Local path of the model's checkpoint from the hub (or the hub cache), else a one-line error.

    `filenames` are tried in order; a repository that keeps its weights under another name (CONCH v1.5:
    `pytorch_model_vision.bin`) names it in the registry."""
    if hub_id is None:  # published elsewhere (CTransPath, CHIEF: Google Drive)
        raise EvalsuiteError(_elsewhere_message(model_name))
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, GatedRepoError, LocalEntryNotFoundError

    repo = hub_id.removeprefix("hf-hub:")
    with _offline_if_unreachable() as offline_reason:
        for filename in filenames:
            try:
                return Path(hf_hub_download(repo, filename))
            except GatedRepoError:
                raise EvalsuiteError(_gated_message(model_name, hub_id)) from None
            except LocalEntryNotFoundError as exc:
                if not offline_reason:  # online, yet the download failed: a network problem
                    raise EvalsuiteError(_fetch_message(model_name, hub_id, gated, _first_line(exc))) from None
                continue  # not in the local cache: maybe the other file name is
            except EntryNotFoundError:
                continue  # the repository has no file of this name: try the next
            except Exception as exc:  # noqa: BLE001 - network, auth and hub errors need the same advice
                raise EvalsuiteError(_fetch_message(model_name, hub_id, gated, _first_line(exc))) from None
    reason = offline_reason or f"it holds none of {', '.join(filenames)}"
    raise EvalsuiteError(_fetch_message(model_name, hub_id, gated, reason))


def create_from_hub(name: str, **kwargs):
    """timm.create_model with pretrained weights from the hub, or a one-line error."""
    import timm

    offline_reason = ""
    try:
        with _offline_if_unreachable() as offline_reason:
            return timm.create_model(name, pretrained=True, **kwargs)
    except Exception as exc:  # noqa: BLE001 - hub, network and auth errors all need the same advice
        hub_id = _timm_hub_id(name)
        where = f" ({hub_id})" if hub_id else ""
        raise EvalsuiteError(
            f"could not fetch pretrained weights for '{name}'{where} from the Hugging Face Hub "
            f"({offline_reason or _first_line(exc)}); "
            "pass --weights /path/to/weights.safetensors with a timm architecture name as --model, "
            "or --random-init for a baseline; gated repositories also need their licence accepted and HF_TOKEN set"
        ) from None


def _fetch_message(model_name: str, hub_id: str, gated: bool | None, reason: str) -> str:
    message = (f"cannot fetch weights for '{model_name}' from the Hugging Face Hub ({hub_id}): {reason}; "
               f"pass --weights with a local copy (its .safetensors/.bin file or the downloaded model folder), "
               f"or --random-init for a baseline")
    repo_url = f"https://huggingface.co/{hub_id.removeprefix('hf-hub:')}"
    if gated:
        message += f"; the repository is gated: accept its licence at {repo_url} and set HF_TOKEN"
    elif gated is None:
        message += f"; if the repository is gated, accept its licence at {repo_url} and set HF_TOKEN"
    return message


def _elsewhere_message(model_name: str) -> str:
    """Where an entry without a hub id has its weights: the first of its `sources` (models/image/entries.py,
    models/slide/<module>.py)."""
    from evalsuite.models.registry import REGISTRY
    from evalsuite.models.slide.entries import SLIDE_ENCODERS

    sources = getattr(REGISTRY.get(model_name) or SLIDE_ENCODERS.get(model_name), "sources", ())
    where = sources[0] if sources else "the page its registry entry names"
    return (f"'{model_name}' has no weights on the Hugging Face Hub: download them from {where} and pass "
            "--weights with the downloaded file, or --random-init for a baseline")


def _gated_message(model_name: str, hub_id: str) -> str:
    repo_url = f"https://huggingface.co/{hub_id.removeprefix('hf-hub:')}"
    return (f"'{model_name}' ({hub_id}) is gated: accept its licence at {repo_url} with your account and set "
            "HF_TOKEN to a read token, or pass --weights with a local copy of the checkpoint")


def _timm_hub_id(name: str) -> str | None:
    if name.startswith("hf-hub:"):
        return name
    try:
        from timm.models import get_pretrained_cfg

        cfg = get_pretrained_cfg(name)
    except Exception:  # noqa: BLE001 - the id only decorates the error message
        return None
    return f"hf-hub:{cfg.hf_hub_id}" if cfg is not None and cfg.hf_hub_id else None


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
