"""Probes that read texts beside the images (zero-shot, text retrieval) and the text inputs they read: prompts and
captions checked, embedded by the model's text tower and cached (inputs.py builds them for a run)."""
