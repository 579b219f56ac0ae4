"""Voices: speaker encoders (CAM++ by default, resemblyzer, ERes2NetV2) and their weights, segmentation and
speaker turns, the per-utterance pipeline that gives voice_N ids, revisable voices and the face split."""
