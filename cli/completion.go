package cli

// umad completion: shell scripts that complete commands and flags. The candidates come
// from umad itself (urfave/cli's hidden --generate-bash-completion, EnableBashCompletion in
// app.go), so the scripts never go stale; fish gets urfave/cli's generated script.

import (
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"
)

func init() {
	register(&ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: "Completes commands, subcommands and flags (type --, then Tab); elsewhere the shell completes\n" +
			"file names. Load it once per shell, or install it:\n\n" +
			"   bash:  source <(umad completion bash)      or  umad completion bash > /etc/bash_completion.d/umad\n" +
			"   zsh:   source <(umad completion zsh) after compinit, or  umad completion zsh > \"${fpath[1]}/_umad\"\n" +
			"   fish:  umad completion fish | source      or  umad completion fish > ~/.config/fish/completions/umad.fish\n\n" +
			"bash and zsh ask the umad they complete for its candidates; fish's script lists them, so\n" +
			"regenerate it after an upgrade.",
		Action: completionCmd,
	})
}

func completionCmd(c *ucli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("completion takes one shell, bash, zsh or fish (got %d arguments)", c.NArg())
	}
	var script string
	switch sh := c.Args().First(); sh {
	case "bash":
		script = bashCompletion
	case "zsh":
		script = zshCompletion
	case "fish":
		s, err := c.App.ToFishCompletion()
		if err != nil {
			return err
		}
		script = s
	default:
		return fmt.Errorf("completion: unknown shell %q: want bash, zsh or fish", sh)
	}
	_, err := io.WriteString(c.App.Writer, script)
	return err
}

// bashCompletion asks the command being completed for the candidates of its words so far,
// except for a flag's value (the word after a flag), where bash completes file names.
const bashCompletion = `# umad's bash completion (umad completion bash)
_umad_complete() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=
    [[ $COMP_CWORD -gt 1 ]] && prev=${COMP_WORDS[COMP_CWORD-1]}
    COMPREPLY=()
    [[ $prev == -* && $cur != -* ]] && return 0
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
}
complete -o default -F _umad_complete umad ./umad
`

// zshCompletion does the same with zsh's completion system.
const zshCompletion = `#compdef umad
# umad's zsh completion (umad completion zsh)
_umad() {
    local cur=${words[CURRENT]} prev=${words[CURRENT-1]}
    if (( CURRENT > 2 )) && [[ $prev == -* && $cur != -* ]]; then
        _files
        return
    fi
    local -a cands
    cands=(${(f)"$(${words[1]} ${words[2,CURRENT]} --generate-bash-completion 2>/dev/null)"})
    compadd -a cands || _files
}
if (( $+functions[compdef] )); then
    compdef _umad umad ./umad
fi
`
