// How late a thread wakes after a condition variable's signal, at a nice
// level, on a machine whose cores are busy: the figure behind running the
// compaction thread that drives an OpenCL device at normal priority
// (docs/compaction.md, "Priorities").
//
// One thread per core spins BUSY % of every 10 ms and sleeps the rest (as
// `shale bench --cpu_stress=BUSY`); a thread at the process's priority
// signals every 0.5 ms; the waiter, NICE levels down, notes the time from
// each signal to its wake-up and works 20 us. 3,000 wake-ups.
//
//   cc -O2 -pthread -o wake_latency tools/wake-latency/wake_latency.c
//   ./wake_latency BUSY NICE        # e.g. 80 19, then 80 0
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WAKEUPS 3000

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static atomic_int stop;
static int busy_percent;
static int waiter_nice;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t signalled = PTHREAD_COND_INITIALIZER;
static double sent_at;  // under `lock`
static int pending;     // under `lock`
static int woken;       // under `lock`
static double latency[WAKEUPS];

static void spin_until(double end) {
    while (now_us() < end) {
    }
}

static void *stress(void *unused) {
    (void)unused;
    while (!atomic_load(&stop)) {
        spin_until(now_us() + 100.0 * busy_percent);
        usleep(10000 - 100 * busy_percent);
    }
    return NULL;
}

static void *waiter(void *unused) {
    (void)unused;
    if (nice(waiter_nice) == -1) {
        perror("nice");
    }
    pthread_mutex_lock(&lock);
    while (woken < WAKEUPS) {
        while (!pending) {
            pthread_cond_wait(&signalled, &lock);
        }
        latency[woken++] = now_us() - sent_at;
        pending = 0;
        pthread_mutex_unlock(&lock);
        spin_until(now_us() + 20);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BUSY_PERCENT NICE\n", argv[0]);
        return 64;
    }
    busy_percent = atoi(argv[1]);
    waiter_nice = atoi(argv[2]);
    if (busy_percent < 0 || busy_percent > 100 || waiter_nice < 0 || waiter_nice > 19) {
        fprintf(stderr, "BUSY_PERCENT is 0-100, NICE 0-19\n");
        return 64;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    pthread_t stressing[256], waiting;
    long started = 0;
    for (; busy_percent > 0 && started < cores && started < 256; started++) {
        pthread_create(&stressing[started], NULL, stress, NULL);
    }
    pthread_create(&waiting, NULL, waiter, NULL);
    usleep(10000);
    for (int sent = 0; sent < WAKEUPS;) {
        usleep(500);
        pthread_mutex_lock(&lock);
        if (!pending && woken == sent) {
            sent_at = now_us();
            pending = 1;
            sent++;
            pthread_cond_signal(&signalled);
        }
        pthread_mutex_unlock(&lock);
    }
    pthread_join(waiting, NULL);
    atomic_store(&stop, 1);
    for (long i = 0; i < started; i++) {
        pthread_join(stressing[i], NULL);
    }
    qsort(latency, WAKEUPS, sizeof latency[0], by_value);
    double sum = 0;
    for (int i = 0; i < WAKEUPS; i++) {
        sum += latency[i];
    }
    printf("cores %ld busy %d%%, waiter nice %d: wake-up after a signal, us: "
           "mean %.0f, p50 %.0f, p90 %.0f, p99 %.0f, max %.0f\n",
           cores, busy_percent, waiter_nice, sum / WAKEUPS, latency[WAKEUPS / 2],
           latency[WAKEUPS * 9 / 10], latency[WAKEUPS * 99 / 100], latency[WAKEUPS - 1]);
    return 0;
}
