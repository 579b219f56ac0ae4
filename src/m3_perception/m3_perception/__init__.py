"""Perception node: faces and voices with stable identities, and speech to text, from camera and microphone topics."""
