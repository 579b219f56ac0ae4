# Source this file (bash or zsh) after `bash bootstrap.sh setup` to use the workspace in any shell:
#   source /path/to/m3-agent-ros/env.sh
# It activates the project virtualenv (ROS 2 Jazzy wheels and Python dependencies), sources the
# colcon overlay in install/, and puts the node executables and the `m3` command on PATH.

# colcon's and venv's scripts read unset variables: lift `set -u` while sourcing them.
case $- in *u*) _m3_nounset=1; set +u ;; *) _m3_nounset= ;; esac

if [ -n "${BASH_SOURCE:-}" ]; then
  M3_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  _m3_shell=bash
elif [ -n "${ZSH_VERSION:-}" ]; then
  # shellcheck disable=SC2296
  M3_ROOT=$(cd "$(dirname "${(%):-%x}")" && pwd)
  _m3_shell=zsh
else
  echo "env.sh: source it from bash or zsh" >&2
  [ -n "$_m3_nounset" ] && set -u
  return 1
fi
export M3_ROOT
_m3_venv=${M3_VENV:-$M3_ROOT/.venv}

if [ ! -f "$_m3_venv/bin/activate" ] || [ ! -f "$M3_ROOT/install/setup.$_m3_shell" ]; then
  echo "env.sh: the workspace is not set up yet; run: bash $M3_ROOT/bootstrap.sh setup" >&2
  unset _m3_venv _m3_shell
  [ -n "$_m3_nounset" ] && set -u
  return 1
fi

# shellcheck disable=SC1091
. "$_m3_venv/bin/activate"
export AMENT_PREFIX_PATH="$_m3_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
# shellcheck disable=SC1090
. "$M3_ROOT/install/setup.$_m3_shell"
for _m3_pkg in m3_agent m3_perception m3_memory m3_control; do
  case ":$PATH:" in
    *":$M3_ROOT/install/$_m3_pkg/lib/$_m3_pkg:"*) ;;
    *) PATH="$M3_ROOT/install/$_m3_pkg/lib/$_m3_pkg:$PATH" ;;
  esac
done
export PATH
export RMW_IMPLEMENTATION=${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}
# Models come from installed packages or local paths only: never from a hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset _m3_venv _m3_shell _m3_pkg
if [ -n "$_m3_nounset" ]; then set -u; fi
unset _m3_nounset
