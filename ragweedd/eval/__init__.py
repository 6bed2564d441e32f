"""Retrieval evaluation: BEIR-layout datasets, ranking metrics with bootstrap intervals."""
