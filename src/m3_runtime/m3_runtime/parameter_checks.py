"""Checks of parameter values and names that every node and the bring-up share, so a bad value or a
misspelt name is "cannot configure: <why>" (exit 2) and never a traceback or a silently ignored setting.

rclpy raises on an override whose type differs from the declared one - even the integer 30 for a float
parameter, which `ros2 param` users expect to work - and quietly keeps an override that names no
declared parameter. The pure functions here coerce and check a value against its (default, descriptor)
row of a node's PARAMETERS table and find the closest known name; declare_checked() applies them to a
node's overrides before it declares its table, and raise_parameter_problems() fails its configure.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

# Parameters rclpy itself declares or reads, never in a node's table.
BUILTIN_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
BUILTIN_PREFIXES = ("qos_overrides.",)
# Names of the other nodes running in this process (bring-up): a process-wide `--ros-args -p` reaches each.
_names_of_other_nodes: set[str] = set()


class ParameterError(ValueError):
    """A parameter value or name that a node cannot be configured with; the message says why."""


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def coerce_value(name: str, value: Any, default: Any) -> Any:
    """value as the type of default: an integer where a float is declared becomes that float (as
    `ros2 param` users expect); any other mismatch (a string for a number, a bool for a number) raises."""
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return value
    if isinstance(default, (list, tuple)) and value is None:
        return type(default)()  # rcl's params-file parser reads an empty list (`name: []`) as not set
    if _kind(value) != _kind(default):
        kind = _kind(default)
        article = "an" if kind[0] in "aeiou" else "a"
        raise ParameterError(f"parameter '{name}' must be {article} {kind}, got {_kind(value)} {value!r}")
    return value


def check_range(name: str, value: Any, descriptor: Any) -> None:
    """Raise when value lies outside the descriptor's integer or floating-point range (ends included)."""
    ranges = descriptor.integer_range if isinstance(value, int) else descriptor.floating_point_range
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ranges:
        return
    low, high = sorted((ranges[0].from_value, ranges[0].to_value))
    if not low <= value <= high:
        raise ParameterError(f"parameter '{name}' = {value!r} is out of range [{low}, {high}]")


def checked_value(name: str, value: Any, row: tuple[Any, Any]) -> Any:
    """value coerced to the row's type and checked against its range; ParameterError says why not."""
    default, descriptor = row
    value = coerce_value(name, value, default)
    check_range(name, value, descriptor)
    return value


def is_builtin(name: str) -> bool:
    """Whether rclpy itself owns the name (use_sim_time, qos_overrides....)."""
    return name in BUILTIN_PARAMETERS or name.startswith(BUILTIN_PREFIXES)


def unknown_name_problem(name: str, known: Iterable[str]) -> str:
    """'unknown parameter 'memroy_dir' (did you mean 'memory_dir'?)'."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown parameter '{name}'{hint}"


def section_problems(values: Mapping[str, Any], table: Mapping[str, tuple[Any, Any]]) -> list[str]:
    """Every problem of one node's parameter section (a params file's ros__parameters plus --set):
    unknown names with the closest known one, wrong types, values out of range."""
    problems = []
    for name, value in values.items():
        if name in table:
            try:
                checked_value(name, value, table[name])
            except ParameterError as error:
                problems.append(str(error))
        elif not is_builtin(name):
            problems.append(unknown_name_problem(name, table))
    return problems


def node_parameters(
    params_file: str | Path, node: str, table: Mapping[str, tuple[Any, Any]], overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What a node in this process would be configured with, for code that runs a node's logic without the
    node (`m3 replay`, the benchmarks): the `node` section's ros__parameters of params_file and the
    overrides, over the table's defaults, each coerced and checked as declare_checked does (an integer
    where a float is declared becomes that float); ParameterError names every problem."""
    data = yaml.safe_load(Path(params_file).read_text()) or {}
    given = {**(((data.get(node) or {}).get("ros__parameters")) or {}), **(overrides or {})}
    problems = section_problems(given, table)
    if problems:
        raise ParameterError(f"{params_file}: {node}: {'; '.join(problems)}")
    values = {name: row[0] for name, row in table.items()}
    values.update((name, checked_value(name, value, table[name])) for name, value in given.items() if name in table)
    return values


def share_names(names: Iterable[str]) -> None:
    """The bring-up runs several nodes in one process: a name of one of them is only a warning in another."""
    _names_of_other_nodes.update(names)


def declare_checked(node: Any, table: Mapping[str, tuple[Any, Any]]) -> list[str]:
    """Declare a node's table with its overrides checked first (coerced int -> float, range, type).

    A bad override is left out (the default is declared) and its problem kept in
    node.parameter_problems, for raise_parameter_problems() to fail configure with, as does an override
    naming no parameter of this node. A name another node in this process declares (share_names) is
    only logged: a process-wide `--ros-args -p` reaches every node of `m3 run`. Returns the problems."""
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
    from rclpy.parameter import Parameter  # here: the checks above stay plain Python

    overrides: dict[str, Any] = node._parameter_overrides  # rclpy keeps no public view of them
    problems: list[str] = []
    for name, row in table.items():
        if name in overrides:
            try:
                overrides[name] = Parameter(name, value=checked_value(name, overrides[name].value, row))
            except ParameterError as error:
                problems.append(str(error))
                del overrides[name]
        try:
            node.declare_parameter(name, row[0], row[1])
        except (InvalidParameterTypeException, InvalidParameterValueException) as error:  # rclpy's stricter word
            problems.append(f"parameter '{name}': {error}")
            node.declare_parameter(name, row[0], row[1], ignore_override=True)
    for name in sorted(set(overrides) - set(table)):
        if is_builtin(name) or node.has_parameter(name):
            continue
        if name in _names_of_other_nodes:
            node.get_logger().warning(f"parameter '{name}' is not one of {node.get_name()}'s: ignored here")
        else:
            problems.append(unknown_name_problem(name, table))
    node.parameter_problems = problems
    return problems


def raise_parameter_problems(node: Any) -> None:
    """Fail configure (logged "cannot configure: <why>") when declare_checked() found problems."""
    problems = getattr(node, "parameter_problems", None)
    if problems:
        raise ParameterError("; ".join(problems))
