"""Where the robot was: a pose track on the stream clock (poses) and named regions of the map (regions)."""
