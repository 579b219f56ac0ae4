"""Control node: the Instruct action, reasoning over memory in retrieval rounds to answer and plan."""
