"""Stage 6, scores: classification and segmentation metrics and their bootstrap intervals."""
