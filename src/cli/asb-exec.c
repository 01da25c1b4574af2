/* `asb exec [-i] [-t] NAME -- CMD...`: run CMD in a sandbox through the Start stream. Output is
 * passed through as it arrives, -i forwards stdin (WriteStdin, EOF at the end of input), -t runs
 * CMD on a terminal sized like ours (raw mode locally, SIGWINCH -> ResizeTTY), SIGINT/SIGTERM are
 * forwarded (SendSignal), and the remote exit code is ours (a signal death: 128+signal). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "basic/io-util.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

typedef struct exec_state {
    asb_sandbox *sandbox;
    bool interactive, tty;
    atomic_int pid;        /* 0 until init */
    atomic_int last_signal; /* last signal forwarded */
    volatile int cancel;    /* asb_sandbox_process_options.cancel */
    int wake[2];            /* pipe: wakes the stdin thread at the end */
    pthread_mutex_t lock;
    pthread_cond_t started;
    bool init_done, finished;
} exec_state;

static void exec_usage(FILE *f)
{
    fprintf(f, "Usage: asb exec [-i] [-t] NAME -- CMD [ARG...]\n\n"
               "Run CMD in the sandbox NAME (or the sandbox of the claim NAME).\n\n"
               "Options:\n"
               "  -i, --stdin     pass standard input to CMD (EOF at the end of input)\n"
               "  -t, --tty       run CMD on a terminal sized like this one\n"
               "  -h, --help      show this help\n" CLI_GLOBAL_HELP
               "\nThe exit code is CMD's (128+N when a signal N ended it, 137 when unknown).\n");
}

static int on_init(int process_id, void *payload)
{
    exec_state *st = payload;
    atomic_store(&st->pid, process_id);
    pthread_mutex_lock(&st->lock);
    st->init_done = true;
    pthread_cond_broadcast(&st->started);
    pthread_mutex_unlock(&st->lock);
    return 0;
}

static int on_stdout(const char *data, size_t len, void *payload)
{
    return loop_write(STDOUT_FILENO, data, len) < 0 ? 1 : 0;
}

static int on_stderr(const char *data, size_t len, void *payload)
{
    return loop_write(STDERR_FILENO, data, len) < 0 ? 1 : 0;
}

/* Waits for the process id; 0 when the call ended without one. */
static int wait_pid(exec_state *st)
{
    pthread_mutex_lock(&st->lock);
    while (!st->init_done && !st->finished)
        pthread_cond_wait(&st->started, &st->lock);
    pthread_mutex_unlock(&st->lock);
    return atomic_load(&st->pid);
}

static void *stdin_thread(void *arg)
{
    exec_state *st = arg;
    int pid = wait_pid(st);
    if (!pid)
        return NULL;
    char buf[65536];
    for (;;) {
        struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = st->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break; /* the process ended */
        if (!p[0].revents)
            continue;
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            /* End of input (or an error reading it): close the remote stdin. */
            (void)asb_sandbox_write_stdin(st->sandbox, pid, NULL, 0, 1);
            break;
        }
        if (asb_sandbox_write_stdin(st->sandbox, pid, buf, (size_t)n, 0) != ASB_OK)
            break; /* the process is gone or closed its stdin */
    }
    return NULL;
}

static bool window_size(unsigned int *cols, unsigned int *rows)
{
    struct winsize ws;
    for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++)
        if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
            *cols = ws.ws_col;
            *rows = ws.ws_row;
            return true;
        }
    return false;
}

/* The signals the signal thread takes: SIGINT, SIGTERM, SIGHUP and SIGWINCH to forward, SIGUSR1
 * from the main thread to end it. */
static void exec_signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGWINCH);
    sigaddset(set, SIGUSR1);
}

/* Receives exec_signal_set()'s signals (blocked in every thread) and forwards them; SIGUSR1
 * from the main thread ends it. */
static void *signal_thread(void *arg)
{
    exec_state *st = arg;
    sigset_t set;
    exec_signal_set(&set);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGUSR1)
            return NULL;
        int pid = atomic_load(&st->pid);
        if (sig == SIGWINCH) {
            unsigned int cols, rows;
            if (st->tty && pid && window_size(&cols, &rows))
                (void)asb_sandbox_resize(st->sandbox, pid, cols, rows);
            continue;
        }
        int fwd = sig == SIGHUP ? SIGTERM : sig;
        atomic_store(&st->last_signal, fwd);
        if (!pid || asb_sandbox_signal(st->sandbox, pid, fwd) != ASB_OK)
            st->cancel = 1; /* not started yet, or the daemon refused: end the call */
    }
}

static struct termios saved_tio;
static bool tio_saved;

static void restore_tty(void)
{
    if (tio_saved)
        (void)tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
    tio_saved = false;
}

/* What the command line asks: the sandbox, the command and -i/-t. */
typedef struct exec_args {
    const char *name;
    char **cmd;
    bool interactive, tty;
} exec_args;

/* Parses the command line into a; -1 when the command runs, else the exit code after saying
 * why not. Options may also follow the name (`asb exec NAME -i -- CMD`), as with kubectl. */
static int exec_parse(int argc, char **argv, exec_args *a)
{
    static const struct option opts[] = {{"stdin", no_argument, NULL, 'i'},
                                         {"tty", no_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    int c;
    while ((c = getopt_long(argc, argv, "+ith" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'i':
            a->interactive = true;
            break;
        case 't':
            a->tty = true;
            break;
        default:
            return cli_usage_option(c, argv, exec_usage);
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "error: expected a sandbox name and a command: asb exec NAME -- CMD...\n");
        return main_usage_error(exec_usage);
    }
    a->name = argv[optind++];
    while (optind < argc && strcmp(argv[optind], "--") != 0 && argv[optind][0] == '-') {
        const char *o = argv[optind];
        if (strcmp(o, "-i") == 0 || strcmp(o, "--stdin") == 0)
            a->interactive = true;
        else if (strcmp(o, "-t") == 0 || strcmp(o, "--tty") == 0)
            a->tty = true;
        else if (strcmp(o, "-it") == 0 || strcmp(o, "-ti") == 0)
            a->interactive = a->tty = true;
        else {
            fprintf(stderr, "error: unknown option \"%s\" (put the command after --)\n", o);
            return 2;
        }
        optind++;
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc || !*a->name) {
        fprintf(stderr, "error: you must specify at least one command for the sandbox: "
                        "asb exec NAME -- CMD...\n");
        return 2;
    }
    a->cmd = argv + optind;
    return -1;
}

/* Signals go to the signal thread only; writes to a closed stdout fail with EPIPE. */
static void block_exec_signals(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    exec_signal_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* -t: a remote pty of our window's size, and our terminal raw until restore_tty(). */
static void enter_tty(asb_sandbox_process_options *po)
{
    po->pty = 1;
    (void)window_size(&po->pty_cols, &po->pty_rows);
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        cfmakeraw(&raw);
        if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0)
            tio_saved = true;
    }
}

/* Wakes and joins the helper threads once the call has ended. */
static void join_helpers(exec_state *st, bool have_in, pthread_t in_t, bool have_sig,
                         pthread_t sig_t)
{
    pthread_mutex_lock(&st->lock);
    st->finished = true;
    pthread_cond_broadcast(&st->started);
    pthread_mutex_unlock(&st->lock);
    if (write(st->wake[1], "x", 1) < 0) {
        /* the pipe is ours and empty: cannot fail */
    }
    if (have_in)
        pthread_join(in_t, NULL);
    if (have_sig) {
        pthread_kill(sig_t, SIGUSR1);
        pthread_join(sig_t, NULL);
    }
}

/* Our exit code: the remote process's, 128+N for a signal, 1 or the error's code otherwise. */
static int exec_exit_code(int r, int code, int last_signal)
{
    if (r == ASB_OK)
        return code >= 0 ? code & 0xff : last_signal ? 128 + last_signal : 128 + SIGKILL;
    if (r == ASB_ECANCELLED && last_signal)
        return 128 + last_signal;
    if (r > 0)
        return 1; /* a callback stopped the stream: our stdout or stderr went away */
    return cli_print_sandbox_error(NULL);
}

int asb_exec(int argc, char **argv)
{
    exec_args a = {0};
    int ret = exec_parse(argc, argv, &a);
    if (ret >= 0)
        return ret;
    asb_client *cl = NULL;
    ret = cli_client(&cl);
    if (ret)
        return ret;
    exec_state st = {.interactive = a.interactive, .tty = a.tty, .wake = {-1, -1}};
    ret = cli_sandbox_open(cl, a.name, &st.sandbox);
    asb_client_free(cl);
    if (ret)
        return ret;

    pthread_mutex_init(&st.lock, NULL);
    pthread_cond_init(&st.started, NULL);
    if (pipe2(st.wake, O_CLOEXEC) < 0) {
        fprintf(stderr, "error: pipe: %m\n");
        asb_sandbox_free(st.sandbox);
        return 1;
    }
    block_exec_signals();
    asb_sandbox_process_options po = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    po.cancel = &st.cancel;
    /* Without -i the remote stdin is closed at once, as `kubectl exec` without -i (on a terminal
     * closing stdin would close the terminal, so it stays open there); libasb sends the close on
     * the Start call's own connection. */
    po.close_stdin = !a.interactive && !a.tty;
    if (a.tty)
        enter_tty(&po);
    pthread_t sig_t, in_t;
    bool have_sig = pthread_create(&sig_t, NULL, signal_thread, &st) == 0;
    bool have_in = a.interactive && pthread_create(&in_t, NULL, stdin_thread, &st) == 0;

    asb_sandbox_callbacks cbs = ASB_SANDBOX_CALLBACKS_INIT;
    cbs.init_cb = on_init;
    cbs.stdout_cb = on_stdout;
    cbs.stderr_cb = on_stderr;
    cbs.payload = &st;
    int code = -1;
    int r = asb_sandbox_start(&code, st.sandbox, (const char *const *)a.cmd, &po, &cbs);
    join_helpers(&st, have_in, in_t, have_sig, sig_t);
    restore_tty();
    ret = exec_exit_code(r, code, atomic_load(&st.last_signal));
    close(st.wake[0]);
    close(st.wake[1]);
    asb_sandbox_free(st.sandbox);
    pthread_cond_destroy(&st.started);
    pthread_mutex_destroy(&st.lock);
    /* The signal mask stays: a signal arriving now must not kill us before we exit. */
    return ret;
}
