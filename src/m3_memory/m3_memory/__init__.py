"""Memory node: a durable, entity-centric multimodal memory graph served through search_node / search_clip."""
