"""`tenure completion bash|zsh|fish`: a completion script written from the argparse tree that
`tenure` parses with, so it names every command and option there is, and nothing else.

Each script knows the tree's nodes by their words (`leases`, `leases list`); it finds the node
the command line has reached by taking each word that names a child of the node so far, and
offers that node's subcommands and options, or an option's choices right after it."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")


@dataclass
class Node:
    words: str  # "" for `tenure` itself, "leases list" for a command
    children: dict[str, str] = field(default_factory=dict)  # name -> help
    options: dict[str, str] = field(default_factory=dict)  # --flag -> help
    choices: dict[str, list[str]] = field(default_factory=dict)  # --flag -> its choices


def nodes(p: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[Node]:
    """Every parser of the tree, as a Node, the root first."""
    node = Node(" ".join(words))
    subs: list[tuple[str, argparse.ArgumentParser]] = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                node.children[name] = helps.get(name, "")
                subs.append((name, sub))
            continue
        if not action.option_strings and action.choices:  # `completion bash|zsh|fish`
            node.children.update({str(c): action.help or "" for c in action.choices})
        for flag in action.option_strings:
            node.options[flag] = "" if action.help == argparse.SUPPRESS else action.help or ""
            if action.choices:
                node.choices[flag] = [str(c) for c in action.choices]
    yield node
    for name, sub in subs:
        yield from nodes(sub, (*words, name))


def _one_line(text: str) -> str:
    """Help text fit for a shell's single-quoted string: one line, no single quote."""
    return re.sub(r"\s+", " ", text).replace("'", "").strip()


def _lookups(tree: list[Node], say: str) -> str:
    """The three shell functions bash and zsh share (`say` is how each shell prints): whether
    some words name a command, what may follow a command, and an option's choices."""
    known = "|".join(f"'{n.words}'" for n in tree if n.words)
    words = "\n".join(
        f"        '{n.words}') {say} '{' '.join([*n.children, *n.options])}' ;;" for n in tree
    )
    choices = "\n".join(
        f"        '{n.words}|{flag}') {say} '{' '.join(values)}' ;;"
        for n in tree
        for flag, values in n.choices.items()
    )
    return f"""__tenure_is_node() {{
    case "$1" in
        {known}) return 0 ;;
    esac
    return 1
}}

__tenure_words() {{
    case "$1" in
{words}
    esac
}}

__tenure_choices() {{
    case "$1|$2" in
{choices}
    esac
}}
"""


def _bash(tree: list[Node]) -> str:
    lookups = _lookups(tree, "echo")
    return f"""# bash completion for tenure (written by `tenure completion bash`)
# Load it with:  source <(tenure completion bash)
{lookups}
_tenure() {{
    local cur prev node word i next found
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev=""
    if [ "$COMP_CWORD" -gt 0 ]; then prev="${{COMP_WORDS[COMP_CWORD-1]}}"; fi
    node=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        [ "$word" = "--" ] && return 0
        case "$word" in -*) continue ;; esac
        next="${{node:+$node }}$word"
        if __tenure_is_node "$next"; then node="$next"; fi
    done
    found="$(__tenure_choices "$node" "$prev")"
    if [ -n "$found" ]; then
        COMPREPLY=($(compgen -W "$found" -- "$cur"))
        return 0
    fi
    COMPREPLY=($(compgen -W "$(__tenure_words "$node")" -- "$cur"))
}}

complete -o default -F _tenure tenure
"""


def _zsh(tree: list[Node]) -> str:
    lookups = _lookups(tree, "print -r --")
    return f"""#compdef tenure
# zsh completion for tenure (written by `tenure completion zsh`)
# Load it with:  source <(tenure completion zsh)   (after compinit)
{lookups}
_tenure() {{
    local node="" word next found
    local -i i
    for (( i = 2; i < CURRENT; i++ )); do
        word="${{words[i]}}"
        [[ "$word" == "--" ]] && return 0
        [[ "$word" == -* ]] && continue
        next="${{node:+$node }}$word"
        if __tenure_is_node "$next"; then node="$next"; fi
    done
    found="$(__tenure_choices "$node" "${{words[CURRENT-1]}}")"
    if [[ -n "$found" ]]; then
        compadd -- ${{=found}}
        return 0
    fi
    compadd -- ${{=$(__tenure_words "$node")}}
}}

compdef _tenure tenure
"""


def _fish(tree: list[Node]) -> str:
    known = " ".join(f"'{n.words}'" for n in tree if n.words)
    lines = [
        "# fish completion for tenure (written by `tenure completion fish`)",
        "# Load it with:  tenure completion fish | source",
        f"set -g __tenure_nodes {known}",
        "",
        "function __tenure_node",
        "    set -l node ''",
        "    for word in (commandline -opc)[2..-1]",
        "        if test \"$word\" = '--'",
        "            echo -- '--'",
        "            return",
        "        end",
        "        string match -q -- '-*' $word; and continue",
        '        set -l next (string trim -- "$node $word")',
        "        if contains -- $next $__tenure_nodes",
        "            set node $next",
        "        end",
        "    end",
        "    echo -- $node",
        "end",
        "",
    ]
    for n in tree:
        at = f"test (__tenure_node) = '{n.words}'"
        for name, help_ in n.children.items():
            lines.append(f"complete -c tenure -n \"{at}\" -f -a '{name}' -d '{_one_line(help_)}'")
        for flag, help_ in n.options.items():
            if flag.startswith("--"):
                spec = f"-l '{flag[2:]}'"
            elif len(flag) == 2:
                spec = f"-s '{flag[1:]}'"
            else:
                spec = f"-o '{flag[1:]}'"
            values = n.choices.get(flag)
            takes = f" -x -a '{' '.join(values)}'" if values else ""
            lines.append(f"complete -c tenure -n \"{at}\" {spec}{takes} -d '{_one_line(help_)}'")
    return "\n".join(lines) + "\n"


def script(shell: str, p: argparse.ArgumentParser) -> str:
    tree = list(nodes(p))
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](tree)
