"""planrun's own bash and fish completion scripts, in place of click's.

Click's bash script inserts each value as it is (`planrun run $(touch x).yaml`, `my plan.yaml`
as two words) and glob-expands it; click 8.4's fish script does not parse its own protocol and
runs each value as a command. These scripts keep click's protocol (`_PLANRUN_COMPLETE`), quote
values as the shell reads them (bash) or let fish quote them, and never evaluate a value.
"""

from __future__ import annotations

from click.shell_completion import (
    BashComplete,
    CompletionItem,
    FishComplete,
    ShellComplete,
    ZshComplete,
    add_completion_class,
)

# `type,value` lines from planrun; each value is inserted quoted for where the word being
# completed stands, so a plan file named `$(touch x).yaml` or `my plan.yaml` reaches the command
# line as one word, unexpanded: after an opening ' or " readline keeps that quote and closes it,
# so the value is escaped for inside it; elsewhere `printf %q` quotes it.
_BASH = """\
%(complete_func)s() {
    local IFS=$'\\n'
    local response type value quoted cur=${COMP_WORDS[COMP_CWORD]}
    response=$(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD \\
%(complete_var)s=bash_complete "$1")
    COMPREPLY=()
    while IFS=',' read -r type value; do
        if [[ $type == 'dir' ]]; then
            COMPREPLY=()
            compopt -o dirnames
        elif [[ $type == 'file' ]]; then
            COMPREPLY=()
            compopt -o default
        elif [[ $type == 'plain' ]]; then
            case $cur in
                \\'*) quoted=${value//\\'/\\'\\\\\\'\\'} ;;
                \\"*) quoted=${value//\\\\/\\\\\\\\}; quoted=${quoted//\\$/\\\\\\$}
                    quoted=${quoted//\\`/\\\\\\`}; quoted=${quoted//\\"/\\\\\\"} ;;
                *) printf -v quoted '%%q' "$value" ;;
            esac
            COMPREPLY+=("$quoted")
        fi
    done <<< "$response"
    return 0
}

%(complete_func)s_setup() {
    complete -o nosort -F %(complete_func)s %(prog_name)s
}

%(complete_func)s_setup;
"""

# One `type,value` line per value (see FishCompletion.format_completion); fish escapes what it
# inserts, and a value is only ever printed.
_FISH = """\
function %(complete_func)s
    # quoted: one argument each, even for an empty token or a line of several lines
    set -l line (commandline -cp)
    set -l cur (commandline -t)
    set -l response (env %(complete_var)s=fish_complete COMP_WORDS="$line" COMP_CWORD="$cur" \\
%(prog_name)s)
    for completion in $response
        set -l metadata (string split -m 1 , -- $completion)
        switch $metadata[1]
            case dir
                __fish_complete_directories $metadata[2]
            case file
                __fish_complete_path $metadata[2]
            case plain
                printf '%%s\\n' $metadata[2]
        end
    end
end

complete --no-files --command %(prog_name)s --arguments "(%(complete_func)s)"
"""


class _Tolerant(ShellComplete):
    """A malformed protocol environment (`_PLANRUN_COMPLETE` left exported by hand, without
    COMP_WORDS or with COMP_CWORD not a number) completes nothing, never a traceback."""

    def complete(self) -> str:
        try:
            self.get_completion_args()
        except (KeyError, ValueError, IndexError):
            return ""
        return super().complete()


class BashCompletion(_Tolerant, BashComplete):
    """Click's bash protocol with a script that quotes what it inserts."""

    source_template = _BASH


class ZshCompletion(_Tolerant, ZshComplete):
    """Click's zsh protocol and script (compadd quotes what it inserts)."""


class FishCompletion(_Tolerant, FishComplete):
    """Click's fish protocol, one `type,value` line per value, with a script that parses it."""

    source_template = _FISH

    def format_completion(self, item: CompletionItem) -> str:
        # planrun offers no help texts; a value never holds a newline (see completion.py)
        return f"{item.type},{item.value}"


def register() -> None:
    """Answer `_PLANRUN_COMPLETE=bash_complete|zsh_complete|fish_complete` with these classes."""
    add_completion_class(BashCompletion, "bash")
    add_completion_class(ZshCompletion, "zsh")
    add_completion_class(FishCompletion, "fish")
