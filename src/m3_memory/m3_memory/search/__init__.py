"""Finding memories: the search API behind the services, fleet search, the entity view, the text
embedder (and its ONNX encoder) and the face and voice query encoders."""
