//! `munmapq completions bash|zsh|fish`: the shell's completion of munmapq's
//! command line, made from the definitions `--help` is made of (the options
//! in help::OPTIONS, the words in help::WORDS), so that the three never
//! disagree. After the command (`munmapq [OPTIONS] COMMAND ...`, `munmapq
//! doctor COMMAND ...`) the command's own completion takes over.

use crate::help::{Takes, OPTIONS, TOPICS, WORDS};

/// The words, space-separated.
fn words() -> String {
    WORDS.map(|w| w.0).join(" ")
}

/// The shells the words that take one accept.
const COMPLETED_SHELLS: &str = "bash zsh fish";

/// The options that take their value as the next argument.
fn with_value() -> Vec<&'static str> {
    OPTIONS
        .iter()
        .filter(|o| matches!(o.takes, Takes::File(_) | Takes::Value(_) | Takes::OneOf(_)))
        .map(|o| o.long)
        .collect()
}

/// Every form an option is typed in, for bash: `--stats`, `--stats=full`.
fn option_forms() -> Vec<String> {
    let mut v = Vec::new();
    for o in &OPTIONS {
        v.push(o.long.to_string());
        v.extend(o.short.map(str::to_string));
        if let Takes::Inline(values) = o.takes {
            v.extend(values.iter().map(|x| format!("{}={x}", o.long)));
        }
    }
    v
}

/// The first clause of an option's help, for the shells that show one.
fn summary(help: &str) -> String {
    let end = help.find([';', '(', ',']).unwrap_or(help.len());
    help[..end]
        .trim()
        .chars()
        .filter(|c| !"'\"[]:\\$`".contains(*c))
        .collect()
}

pub fn script(shell: &str) -> Result<String, String> {
    match shell {
        "bash" => Ok(bash()),
        "zsh" => Ok(zsh()),
        "fish" => Ok(fish()),
        other => Err(format!(
            "completions: unknown shell {} (accepts bash, zsh or fish)",
            crate::quote::quote(other.as_ref())
        )),
    }
}

fn bash() -> String {
    let mut value_cases = String::new();
    for o in &OPTIONS {
        let action = match o.takes {
            Takes::File(_) => "COMPREPLY=($(compgen -f -- \"$cur\")); return ;;".to_string(),
            Takes::Value(_) => "return ;;".to_string(),
            Takes::OneOf(v) => format!(
                "COMPREPLY=($(compgen -W '{}' -- \"$cur\")); return ;;",
                v.join(" ")
            ),
            _ => continue,
        };
        value_cases.push_str(&format!("        {}) {action}\n", o.long));
    }
    format!(
        "# munmapq's completion for bash: source <(munmapq completions bash)\n\
         _munmapq() {{\n    \
             local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} i word= at=0\n    \
             COMPREPLY=()\n    \
             case $prev in\n\
         {value_cases}    \
             esac\n    \
             for ((i = 1; i < COMP_CWORD; i++)); do\n        \
                 case ${{COMP_WORDS[i]}} in\n            \
                     {takes}) ((i++)) ;;\n            \
                     --) at=$((i + 1)); break ;;\n            \
                     -*) ;;\n            \
                     *) word=${{COMP_WORDS[i]}}; at=$i; break ;;\n        \
                 esac\n    \
             done\n    \
             if [[ $at -eq 0 || ($at -eq $COMP_CWORD && -z $word) ]]; then\n        \
                 if [[ $at -eq 0 && $cur == -* ]]; then\n            \
                     COMPREPLY=($(compgen -W '{options}' -- \"$cur\"))\n        \
                 elif [[ $at -eq 0 ]]; then\n            \
                     COMPREPLY=($(compgen -W '{words}' -- \"$cur\") $(compgen -c -- \"$cur\"))\n        \
                 else\n            \
                     COMPREPLY=($(compgen -c -- \"$cur\"))\n        \
                 fi\n        \
                 return\n    \
             fi\n    \
             case $word in\n        \
                 shell-init|preload-env|completions)\n            \
                     if [[ $COMP_CWORD -eq $((at + 1)) ]]; then\n                \
                         COMPREPLY=($(compgen -W '{shells}' -- \"$cur\"))\n            \
                     elif [[ $word == shell-init ]]; then\n                \
                         COMPREPLY=($(compgen -c -- \"$cur\"))\n            \
                     fi ;;\n        \
                 help) [[ $COMP_CWORD -eq $((at + 1)) ]] && COMPREPLY=($(compgen -W '{words} {topics}' -- \"$cur\")) ;;\n        \
                 selftest) COMPREPLY=($(compgen -W '--lib' -- \"$cur\")); [[ $prev == --lib ]] && COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n        \
                 version) ;;\n        \
                 doctor) at=$((at + 1)) ;&\n        \
                 *)\n            \
                     if [[ $COMP_CWORD -eq $at ]]; then\n                \
                         COMPREPLY=($(compgen -c -- \"$cur\"))\n            \
                     elif declare -F _command_offset >/dev/null; then\n                \
                         _command_offset \"$at\"\n            \
                     else\n                \
                         COMPREPLY=($(compgen -f -- \"$cur\"))\n            \
                     fi ;;\n    \
             esac\n\
         }}\n\
         complete -F _munmapq munmapq\n",
        takes = with_value().join("|"),
        options = option_forms().join(" "),
        words = words(),
        topics = TOPICS.map(|t| t.0).join(" "),
        shells = COMPLETED_SHELLS,
    )
}

fn zsh() -> String {
    let mut specs = String::new();
    for o in &OPTIONS {
        let names: Vec<&str> = std::iter::once(o.long).chain(o.short).collect();
        let what = summary(o.help);
        let arg = match o.takes {
            Takes::Nothing => String::new(),
            Takes::Inline(v) => format!("::format:({})", v.join(" ")),
            Takes::File(v) => format!(":{}:_files", v.to_lowercase()),
            Takes::Value(v) => format!(":{}: ", v.to_lowercase()),
            Takes::OneOf(v) => format!(":{}:({})", o.long.trim_start_matches('-'), v.join(" ")),
        };
        let eq = if matches!(o.takes, Takes::Inline(_)) {
            "=-"
        } else {
            ""
        };
        // `-q` and `--quiet` exclude each other: zsh's brace expansion,
        // outside the quotes, gives one spec each.
        let spec = if names.len() > 1 {
            format!("'({})'{{{}}}'", names.join(" "), names.join(","))
        } else {
            format!("'{}", names[0])
        };
        specs.push_str(&format!("    {spec}{eq}[{what}]{arg}' \\\n"));
    }
    format!(
        "#compdef munmapq\n\
         # munmapq's completion for zsh: source <(munmapq completions zsh), after compinit\n\
         _munmapq() {{\n  \
           local curcontext=$curcontext state line ret=1\n  \
           _arguments -S -C \\\n\
         {specs}    \
             '(-)1: :->first' \\\n    \
             '(-)*:: :->rest' && ret=0\n  \
           case $state in\n    \
             first)\n      \
               _alternative 'words:munmapq word:({words})' 'commands:command:_command_names -e' && ret=0 ;;\n    \
             rest)\n      \
               case $words[1] in\n        \
                 shell-init|preload-env|completions)\n          \
                   if (( CURRENT == 2 )); then _values shell {shells} && ret=0\n          \
                   elif [[ $words[1] == shell-init ]]; then _command_names -e && ret=0; fi ;;\n        \
                 help) (( CURRENT == 2 )) && _values word {words} {topics} && ret=0 ;;\n        \
                 selftest) _arguments '--lib[use this libmunmapq]:path:_files' && ret=0 ;;\n        \
                 version) ;;\n        \
                 doctor) shift words; (( CURRENT-- )); _normal && ret=0 ;;\n        \
                 *) _normal && ret=0 ;;\n      \
               esac ;;\n  \
           esac\n  \
           return ret\n\
         }}\n\
         compdef _munmapq munmapq\n",
        words = words(),
        topics = TOPICS.map(|t| t.0).join(" "),
        shells = COMPLETED_SHELLS,
    )
}

fn fish() -> String {
    let mut out = String::from(
        "# munmapq's completion for fish: munmapq completions fish | source\n\
         complete -c munmapq -e\n",
    );
    // Before the first word: options, words and commands; after it, the
    // word's arguments or the command's own completion.
    let first = "not __fish_munmapq_after_command";
    // The command's part of the line, past munmapq's options (and their
    // values), `--` and `doctor`, with the word being typed; fails while
    // the command is not there yet.
    out.push_str(&format!(
        "function __fish_munmapq_command\n    \
             set -l words (commandline -opc)\n    \
             set -l skip 0\n    \
             for i in (seq 2 (count $words))\n        \
                 set -l w $words[$i]\n        \
                 if test $skip = 1\n            \
                     set skip 0\n        \
                 else if contains -- $w {}\n            \
                     set skip 1\n        \
                 else if not contains -- $w doctor; and not string match -q -- '-*' $w\n            \
                     printf '%s\\n' $words[$i..-1] (commandline -ct)\n            \
                     return 0\n        \
                 end\n    \
             end\n    \
             return 1\n\
         end\n\
         function __fish_munmapq_after_command\n    \
             __fish_munmapq_command >/dev/null\n\
         end\n",
        with_value().join(" ")
    ));
    for o in &OPTIONS {
        let mut line = format!("complete -c munmapq -n '{first}'");
        if let Some(s) = o.short {
            line.push_str(&format!(" -s {}", s.trim_start_matches('-')));
        }
        line.push_str(&format!(" -l {}", o.long.trim_start_matches("--")));
        match o.takes {
            Takes::Nothing | Takes::Inline(_) => line.push_str(" -f"),
            Takes::File(_) => line.push_str(" -r -F"),
            Takes::Value(_) => line.push_str(" -x"),
            Takes::OneOf(v) => line.push_str(&format!(" -x -a '{}'", v.join(" "))),
        }
        line.push_str(&format!(" -d '{}'\n", summary(o.help)));
        out.push_str(&line);
    }
    out.push_str(&format!(
        "complete -c munmapq -n '{first}' -f -a '{}' -d 'munmapq word'\n",
        words()
    ));
    out.push_str(&format!(
        "complete -c munmapq -n '{first}' -f -a '(__fish_complete_command)'\n"
    ));
    let after = |w: &str| format!("__fish_seen_subcommand_from {w}");
    out.push_str(&format!(
        "complete -c munmapq -n '{}; and test (count (commandline -opc)) -eq 2' -f -a '{COMPLETED_SHELLS}'\n",
        after("shell-init preload-env completions")
    ));
    out.push_str(&format!(
        "complete -c munmapq -n '{}; and test (count (commandline -opc)) -ge 3' -f -a '(__fish_complete_command)'\n",
        after("shell-init")
    ));
    out.push_str(&format!(
        "complete -c munmapq -n '{}' -f -a '{} {}'\n",
        after("help"),
        words(),
        TOPICS.map(|t| t.0).join(" ")
    ));
    // The command's own completion, past munmapq's part of the line.
    out.push_str(
        "complete -c munmapq -n '__fish_munmapq_after_command; and not __fish_seen_subcommand_from help version shell-init preload-env completions selftest' \
         -x -a '(__fish_complete_subcommand --commandline (__fish_munmapq_command))'\n",
    );
    out
}
