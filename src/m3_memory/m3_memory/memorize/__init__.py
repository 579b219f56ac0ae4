"""Turning a closed clip into memories: the rules and model memorizers, the clip prompt, grounding,
whose name was said (name roles and mentions) and constrained JSON replies."""
