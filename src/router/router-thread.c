/* The router's one way to start a detached helper thread (router-core.h). */
#include <errno.h>
#include <pthread.h>

#include "router/router-core.h"

int router_thread_spawn(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0)
        return -ENOMEM;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, ROUTER_THREAD_STACK);
    int e = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return -e;
}
