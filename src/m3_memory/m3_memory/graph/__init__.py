"""The memory graph: face, voice and person entities, episodic and semantic text nodes, their records and
tags, and the storage interface a back-end provides (backend)."""
