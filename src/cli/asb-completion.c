/* `asb completion bash|zsh`: a shell completion script on stdout, as `kubectl completion`. It
 * completes verbs (from asb's verb table), kinds, flags and, after a kind, the names of the
 * objects the server has (`asb get KIND -o name` at completion time). */
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

/* The bash function; zsh runs it through bashcompinit. */
static const char bash_body[] =
    "_asb_complete() {\n"
    "    local cur=${COMP_WORDS[COMP_CWORD]} verb=${COMP_WORDS[1]} i kind=\"\"\n"
    "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
    "        COMPREPLY=($(compgen -W \"$_asb_verbs --help\" -- \"$cur\"))\n"
    "        return\n"
    "    fi\n"
    "    case \"$verb\" in\n"
    "    completion) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")); return ;;\n"
    "    get|describe|delete|wait|apply) ;;\n"
    "    *) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
    "    esac\n"
    "    case \"$cur\" in\n"
    "    -*) COMPREPLY=($(compgen -W \"$_asb_flags\" -- \"$cur\")); return ;;\n"
    "    esac\n"
    "    for ((i = 2; i < COMP_CWORD; i++)); do\n"
    "        case \"${COMP_WORDS[i]}\" in -*) ;; *) kind=${COMP_WORDS[i]}; break ;; esac\n"
    "    done\n"
    "    if [ -z \"$kind\" ]; then\n"
    "        COMPREPLY=($(compgen -W \"$_asb_kinds\" -- \"$cur\"))\n"
    "        return\n"
    "    fi\n"
    "    local names\n"
    "    names=$(asb get \"$kind\" -o 'jsonpath={range .items[*]}{.metadata.name} {end}' "
    "2>/dev/null)\n"
    "    COMPREPLY=($(compgen -W \"$names\" -- \"$cur\"))\n"
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
    printf("events sbx template warmpool swp claim\"\n");
    printf("_asb_flags=\"--output --selector --all-namespaces --watch --for --all --namespace "
           "--server --token --help\"\n");
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
