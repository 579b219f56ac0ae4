"""The node runtime every m3 node shares (perception, memory, control and the bring-up): lifecycle and
bring-up (managed_node), stopping in order (node_shutdown), parameter checks, stamp guards, image and
audio codecs, state files, optional interface packages, REP-155 ids, the checked model cache and child
processes tied to their parent. Nothing here knows about faces, memories or plans."""
