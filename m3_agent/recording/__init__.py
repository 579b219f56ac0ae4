"""rosbag2 recordings without rosbag2: convert videos to bags, read them back, play them."""
