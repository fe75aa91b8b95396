# bash completion for causeway
_causeway() {
  local cur prev cmd
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  cmd=${COMP_WORDS[1]}
  local commands="trace explain query demo check export report mcp merge version"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "$commands --help --verbose" -- "$cur"))
    return
  fi
  case $prev in
    --db|-o|--output|--lib|--nvml-lib|--sysfs-root) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --live) COMPREPLY=($(compgen -W "auto table lines off" -- "$cur")); return ;;
    --launch-duty) COMPREPLY=($(compgen -W "auto always" -- "$cur")); return ;;
    --launch-layer) COMPREPLY=($(compgen -W "auto driver runtime both" -- "$cur")); return ;;
    --layers) COMPREPLY=($(compgen -W "runtime driver nccl hip verbs" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "perfetto" -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    # The subcommand's own options, from its --help.
    COMPREPLY=($(compgen -W "$(causeway "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)" -- "$cur"))
    return
  fi
  case $cmd in
    demo) COMPREPLY=($(compgen -W "--no-gpu $(causeway demo 2>/dev/null | awk '/^  [a-z]/ {print $1}')" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -f -- "$cur")) ;;
  esac
}
complete -F _causeway causeway
