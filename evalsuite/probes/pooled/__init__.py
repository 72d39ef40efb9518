"""Probes on pooled tile features ([N, D] vectors): linear, kNN, few-shot, retrieval, ridge regression."""
