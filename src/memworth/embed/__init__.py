"""Text to vectors and nearest neighbours: encoders, all-MiniLM-L6-v2, vector indexes.

==================  =====================================================================
:mod:`.encoders`    the encoder protocol and a deterministic hashing encoder for tests
:mod:`.minilm`      all-MiniLM-L6-v2 in NumPy, and :func:`load_minilm`
:mod:`.minilm_onnx` the same model on onnxruntime, built from the packaged weights
:mod:`.vector_index`  exact and HNSW (faiss) nearest-neighbour search over unit vectors
==================  =====================================================================

Nothing is imported here: each module loads when it is used (the model and faiss are heavy).
"""
