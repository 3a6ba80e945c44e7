"""Benchmark families; every public module here is imported and registers its families."""
