/* `asb completion bash|zsh`: a shell completion script on stdout, as `kubectl completion`. It
 * completes verbs (from asb's verb table), kinds, flags and the names of the objects the server
 * has, asked at completion time. */
#include <getopt.h>
#include <string.h>

#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void completion_usage(FILE *f)
{
    fprintf(f, "Usage: asb completion bash|zsh\n\n"
               "Prints a completion script. Load it with\n"
               "  source <(asb completion bash)     # bash, e.g. in ~/.bashrc\n"
               "  source <(asb completion zsh)      # zsh, e.g. in ~/.zshrc\n");
}

/* The bash function; zsh runs it through bashcompinit. Names of live objects come from the server
 * at completion time (`asb get KIND -o jsonpath`), with the -n/--server/--token the command line
 * has so far: after a KIND for the verbs that take one (KIND/ completes KIND/NAME), sandbox names
 * for the sandbox verbs (exec, logs, ...), claim names for release. */
static const char bash_body[] =
    "_asb_names() {\n"
    "    local i args=()\n"
    "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
    "        case \"${COMP_WORDS[i]}\" in\n"
    "        -n|--namespace|--server|--token)\n"
    "            args+=(\"${COMP_WORDS[i]}\" \"${COMP_WORDS[i+1]}\") ;;\n"
    "        --namespace=*|--server=*|--token=*) args+=(\"${COMP_WORDS[i]}\") ;;\n"
    "        esac\n"
    "    done\n"
    "    asb get \"$1\" \"${args[@]}\" -o 'jsonpath={range .items[*]}{.metadata.name} {end}' "
    "2>/dev/null\n"
    "}\n"
    "_asb_complete() {\n"
    "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} vi=1\n"
    "    local i kind=\"\" names n verb\n"
    "    while [ \"$vi\" -lt \"$COMP_CWORD\" ]; do  # global flags before the verb\n"
    "        case \"${COMP_WORDS[vi]}\" in\n"
    "        -n|--namespace|--server|--token) ((vi += 2)) ;;\n"
    "        -*) ((vi++)) ;;\n"
    "        *) break ;;\n"
    "        esac\n"
    "    done\n"
    "    verb=${COMP_WORDS[vi]}\n"
    "    if [ \"$COMP_CWORD\" -le \"$vi\" ]; then\n"
    "        COMPREPLY=($(compgen -W \"$_asb_verbs --help\" -- \"$cur\"))\n"
    "        return\n"
    "    fi\n"
    "    case \"$prev\" in\n"
    "    -f|--filename|--patch-file) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
    "    -n|--namespace) COMPREPLY=(); return ;;\n"
    "    esac\n"
    "    case \"$cur\" in\n"
    "    -*) COMPREPLY=($(compgen -W \"$_asb_flags\" -- \"$cur\")); return ;;\n"
    "    esac\n"
    "    case \"$verb\" in\n"
    "    completion) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")); return ;;\n"
    "    exec|ls|logs|suspend|resume|extend|fork)\n"
    "        COMPREPLY=($(compgen -W \"$(_asb_names sandboxes)\" -- \"$cur\")); return ;;\n"
    "    cp)\n"
    "        names=$(_asb_names sandboxes)\n"
    "        COMPREPLY=($(compgen -f -- \"$cur\") $(compgen -W \"$(for n in $names; do "
    "printf '%s: ' \"$n\"; done)\" -- \"$cur\"))\n"
    "        compopt -o nospace 2>/dev/null; return ;;\n"
    "    release)\n"
    "        COMPREPLY=($(compgen -W \"$(_asb_names sandboxclaims)\" -- \"$cur\")); return ;;\n"
    "    snapshot)\n"
    "        if [ \"$COMP_CWORD\" -eq $((vi + 1)) ]; then\n"
    "            COMPREPLY=($(compgen -W \"create ls rm\" -- \"$cur\"))\n"
    "        elif [ \"${COMP_WORDS[vi+1]}\" = rm ]; then\n"
    "            COMPREPLY=($(compgen -W \"$(_asb_names sandboxsnapshots)\" -- \"$cur\"))\n"
    "        else\n"
    "            COMPREPLY=($(compgen -W \"$(_asb_names sandboxes)\" -- \"$cur\"))\n"
    "        fi\n"
    "        return ;;\n"
    "    get|describe|delete|wait|label|annotate|patch|edit|scale) ;;\n"
    "    *) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
    "    esac\n"
    "    case \"$cur\" in\n"
    "    */*)\n"
    "        kind=${cur%%/*}\n"
    "        COMPREPLY=($(compgen -W \"$(for n in $(_asb_names \"$kind\"); do "
    "printf '%s/%s ' \"$kind\" \"$n\"; done)\" -- \"$cur\"))\n"
    "        return ;;\n"
    "    esac\n"
    "    for ((i = vi + 1; i < COMP_CWORD; i++)); do\n"
    "        case \"${COMP_WORDS[i]}\" in\n"
    "        -n|--namespace|--server|--token|-o|--output|-l|--selector|-p|--patch|--type|"
    "--for|--timeout|--replicas) ((i++)) ;;\n"
    "        -*) ;;\n"
    "        *) kind=${COMP_WORDS[i]}; break ;;\n"
    "        esac\n"
    "    done\n"
    "    if [ -z \"$kind\" ]; then\n"
    "        if [ \"$verb\" = scale ]; then\n"
    "            COMPREPLY=($(compgen -W \"sandboxwarmpools swp\" -- \"$cur\"))\n"
    "        else\n"
    "            COMPREPLY=($(compgen -W \"$_asb_kinds\" -- \"$cur\"))\n"
    "        fi\n"
    "        return\n"
    "    fi\n"
    "    COMPREPLY=($(compgen -W \"$(_asb_names \"$kind\")\" -- \"$cur\"))\n"
    "}\n"
    "complete -F _asb_complete asb\n";

static void print_script(bool zsh)
{
    if (zsh)
        printf("#compdef asb\nautoload -U +X bashcompinit && bashcompinit\n");
    printf("_asb_verbs=\"");
    for (size_t i = 0; asb_verb_name(i); i++)
        printf("%s%s", i ? " " : "", asb_verb_name(i));
    printf("\"\n_asb_kinds=\"");
    for (size_t i = 0; asb_kind_at(i); i++)
        printf("%s ", asb_kind_at(i)->plural);
    /* the kinds asb_kind_at() does not count: snapshots (ours) and the recorded Events */
    printf("sandboxsnapshots events sbx template warmpool swp claim snapshot ssnap\"\n");
    printf("_asb_flags=\"--output --selector --all-namespaces --watch --for --all --namespace "
           "--server --token --help --filename --overwrite --type --patch --patch-file "
           "--replicas --no-headers --timeout\"\n");
    fputs(bash_body, stdout);
}

int asb_completion(int argc, char **argv)
{
    int r = cli_parse_global_only(argc, argv, completion_usage);
    if (r >= 0)
        return r;
    if (optind + 1 != argc ||
        (strcmp(argv[optind], "bash") != 0 && strcmp(argv[optind], "zsh") != 0)) {
        fprintf(stderr, "error: asb completion takes one shell: bash or zsh\n");
        return main_usage_error(completion_usage);
    }
    print_script(strcmp(argv[optind], "zsh") == 0);
    return 0;
}
