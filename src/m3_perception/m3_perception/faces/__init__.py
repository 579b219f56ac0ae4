"""Faces: detection and embedding (mediapipe + dlib by default, InsightFace buffalo_l), the IoU tracker
and the per-frame pipeline that gives face_N ids."""
