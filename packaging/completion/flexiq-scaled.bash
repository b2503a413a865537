# bash completion for flexiq-scaled(8); installed by the package as
# /usr/share/bash-completion/completions/flexiq-scaled.
#
# Pool names come from the running daemon (flexiq-scaled status --names,
# which needs read access: root or group flexiq-scaled), else from the
# [pools.NAME] tables of the configuration file and its conf.d drop-ins,
# where they are readable.

_flexiq_scaled_pools() {
	local names
	names=$(flexiq-scaled status --names 2>/dev/null)
	if [[ -z $names && -r /etc/flexiq-scaled/config.toml ]]; then
		names=$(sed -n 's/^[[:space:]]*\[pools\.\([a-z0-9_]*\)\][[:space:]]*\(#.*\)\{0,1\}$/\1/p' \
			/etc/flexiq-scaled/config.toml /etc/flexiq-scaled/conf.d/*.toml 2>/dev/null)
	fi
	printf '%s\n' "$names"
}

_flexiq_scaled() {
	local cur prev words cword
	if declare -F _init_completion >/dev/null; then
		_init_completion || return
	else
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	fi

	local commands="run check-config reload roll status explain pause resume pin unpin pool history observe simulate version help"
	if ((cword == 1)); then
		mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
		return
	fi

	local cmd=${words[1]}
	case $prev in
	--config | --trace | --socket | --runtime-dir | --svg | --png | --db)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	--for | --last | --pid | --timeout | --reason | --since | --until | --width)
		return
		;;
	esac

	if [[ $cur == -* ]]; then
		local flags
		flags=$(flexiq-scaled "$cmd" --help 2>/dev/null | sed -n 's/^  \(-[a-z-]*\).*/\1/p' | sed 's/^-\([a-z]\)/--\1/')
		mapfile -t COMPREPLY < <(compgen -W "$flags" -- "$cur")
		return
	fi

	case $cmd in
	pool)
		# pool add NAME (a new name: nothing to complete) | pool rm POOL
		if ((cword == 2)); then
			mapfile -t COMPREPLY < <(compgen -W "add rm" -- "$cur")
		elif ((cword == 3)) && [[ ${words[2]} == rm ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$(_flexiq_scaled_pools)" -- "$cur")
		fi
		;;
	status | explain | pause | resume | pin | unpin | roll | observe | simulate | history)
		# The first positional argument is a pool (roll takes several).
		local i npos=0
		for ((i = 2; i < cword; i++)); do
			case ${words[i]} in
			--for | --last | --pid | --timeout | --reason | --config | --trace | --socket | --runtime-dir | --since | --until | --width | --svg | --png) ((i++)) ;;
			-*) ;;
			*) ((npos++)) ;;
			esac
		done
		if ((npos == 0)) || [[ $cmd == roll ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$(_flexiq_scaled_pools)" -- "$cur")
		fi
		;;
	help)
		((cword == 2)) && mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
		;;
	check-config)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		;;
	esac
}

complete -F _flexiq_scaled flexiq-scaled
