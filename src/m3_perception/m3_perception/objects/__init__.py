"""Objects: detector back-ends (YOLOv3-tiny by default, a user's YOLO ONNX export, none), their
weights, and a tracker giving stable object ids within an episode, re-identified by appearance."""
