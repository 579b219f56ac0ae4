"""Written text in camera frames: OCR back-ends, region tracking across frames, keyframe gate, CER."""
