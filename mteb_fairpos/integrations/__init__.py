"""Integrations of calibrated embeddings with other systems (Qdrant)."""
