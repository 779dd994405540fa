/* A small "player" traced through the agent's C API (agent/capi/include/socscope_agent.h): a main loop
 * that demultiplexes, decodes and renders frames, recording user functions, markers, marks, variables,
 * context switches between its stages (as a single-threaded scheduler would see them), allocations and a
 * custom state type, and streams the records over TCP to a collector.
 *
 *   cc -I agent/capi/include examples/c/player.c target/debug/libsocscope_agent_capi.a \
 *      -lpthread -ldl -lm -o player
 *   socscope collect --listen 127.0.0.1:7070 &
 *   ./player 127.0.0.1 7070 300          # host, port, frames
 *
 * At the end it prints what it recorded, per type, and the agent's counters (lines starting "player:").
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "socscope_agent.h"

enum { PID_PLAYER = 100, PID_DEMUX = 101, PID_VIDEO = 102, PID_AUDIO = 103 };
enum { T_FRAME = 64, T_FRAME_EXIT = 65, T_BUFFER_LEVEL = 66, T_FRAME_DECODED = 67 };

/* The agent's memory: static, aligned, never moved. */
static _Alignas(SOCSCOPE_AGENT_ALIGN) unsigned char agent_memory[SOCSCOPE_AGENT_SIZE];

/* What the player recorded, per type id (stored + dropped), to print at the end. */
static unsigned long long calls[128];
static unsigned long long dropped_calls;

static void count(int type_id, int status) {
    if (status == SOCSCOPE_STORED) {
        calls[type_id]++;
    } else if (status == SOCSCOPE_DROPPED) {
        dropped_calls++;
    } else {
        fprintf(stderr, "player: record of type %d refused: %d\n", type_id, status);
        exit(1);
    }
}

static uint64_t monotonic_ns(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The transport: one blocking TCP socket; a frame is sent whole or the link is closed. */
static int send_frame(void *user, const uint8_t *frame, size_t len) {
    int fd = *(int *)user;
    while (len > 0) {
        ssize_t n = send(fd, frame, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        frame += n;
        len -= (size_t)n;
    }
    return SOCSCOPE_WRITE_OK;
}

static socscope_agent *agent;
static uint32_t running = PID_PLAYER;

static void run_as(uint32_t pid) {
    if (pid != running) {
        count(1, socscope_context_switch(agent, 0, running, pid));
        running = pid;
    }
}

static void spin_us(unsigned us) {
    uint64_t end = monotonic_ns(NULL) + us * 1000u;
    while (monotonic_ns(NULL) < end) {
    }
}

static size_t demux(unsigned frame) {
    count(11, socscope_user_entry(agent, 0, (uint64_t)(uintptr_t)&demux));
    size_t size = 4000 + (frame * 7919u) % 12000u;
    count(6, socscope_syscall_entry(agent, 0, 63, 3, 0, size, 0));
    spin_us(50);
    count(7, socscope_syscall_exit(agent, 0, 63, (int64_t)size));
    count(12, socscope_user_exit(agent, 0));
    return size;
}

static void decode_video(unsigned frame, size_t size) {
    count(11, socscope_user_entry(agent, 0, (uint64_t)(uintptr_t)&decode_video));
    void *picture = malloc(size);
    count(15, socscope_kmalloc(agent, 0, size, (uint64_t)(uintptr_t)picture));
    socscope_value decoded[3] = {socscope_unsigned(frame * 40u), socscope_unsigned(size),
                                 socscope_string(frame % 12 == 0 ? "I" : "P")};
    count(T_FRAME_DECODED, socscope_record(agent, 0, T_FRAME_DECODED, decoded, 3));
    spin_us(200);
    count(16, socscope_kfree(agent, 0, (uint64_t)(uintptr_t)picture));
    free(picture);
    count(12, socscope_user_exit(agent, 0));
}

static void render(unsigned frame) {
    socscope_value f = socscope_unsigned(frame);
    count(T_FRAME, socscope_record(agent, 0, T_FRAME, &f, 1));
    spin_us(100);
    count(T_FRAME_EXIT, socscope_record(agent, 0, T_FRAME_EXIT, NULL, 0));
    count(10, socscope_mark(agent, 0, frame));
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s HOST PORT FRAMES\n", argv[0]);
        return 2;
    }
    unsigned frames = (unsigned)strtoul(argv[3], NULL, 10);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)atoi(argv[2]));
    if (fd < 0 || inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        fprintf(stderr, "player: cannot connect to %s:%s: %s\n", argv[1], argv[2], strerror(errno));
        return 1;
    }

    socscope_config config = {
        .board = "stb-c-player",
        .soc = "host",
        .os = "linux",
        .application = "player.c",
        .token = NULL,
        .cpu_count = 1,
        .tick_rate_hz = 1000000000u,
        .session_id = (uint64_t)monotonic_ns(NULL),
        .flush_latency_ticks = 20000000u,
        .heartbeat_ticks = 1000000000u,
        .hello_every_ticks = 0,
    };
    if (socscope_agent_size() > sizeof agent_memory) {
        fprintf(stderr, "player: the agent needs %zu bytes\n", socscope_agent_size());
        return 1;
    }
    int rc = socscope_agent_init(agent_memory, sizeof agent_memory, &config, monotonic_ns, NULL, &agent);
    if (rc != SOCSCOPE_OK) {
        fprintf(stderr, "player: socscope_agent_init: %d\n", rc);
        return 1;
    }
    rc = socscope_register_producer(agent, 1, -1, SOCSCOPE_PRODUCER_PROCESS, PID_PLAYER, "player");
    rc |= socscope_register_producer(agent, 2, 1, SOCSCOPE_PRODUCER_THREAD, PID_PLAYER, "player-main");
    rc |= socscope_register_producer(agent, 3, 1, SOCSCOPE_PRODUCER_THREAD, PID_DEMUX, "demux");
    rc |= socscope_register_producer(agent, 4, 1, SOCSCOPE_PRODUCER_THREAD, PID_VIDEO, "video");
    rc |= socscope_register_producer(agent, 5, 1, SOCSCOPE_PRODUCER_THREAD, PID_AUDIO, "audio");
    static const socscope_param frame_params[] = {{"frame", SOCSCOPE_PARAM_UNSIGNED}};
    static const socscope_param level_params[] = {{"bytes", SOCSCOPE_PARAM_UNSIGNED}};
    static const socscope_param decoded_params[] = {{"pts_ms", SOCSCOPE_PARAM_UNSIGNED},
                                                    {"size", SOCSCOPE_PARAM_UNSIGNED},
                                                    {"kind", SOCSCOPE_PARAM_STRING}};
    rc |= socscope_register_type(agent, T_FRAME, "render_frame", SOCSCOPE_CATEGORY_STATE_ENTER, 0,
                                 frame_params, 1);
    rc |= socscope_register_type(agent, T_FRAME_EXIT, "render_frame_exit", SOCSCOPE_CATEGORY_STATE_EXIT,
                                 T_FRAME, NULL, 0);
    rc |= socscope_register_type(agent, T_BUFFER_LEVEL, "buffer_level", SOCSCOPE_CATEGORY_VARIABLE, 0,
                                 level_params, 1);
    rc |= socscope_register_type(agent, T_FRAME_DECODED, "frame_decoded", SOCSCOPE_CATEGORY_PUNCTUAL, 0,
                                 decoded_params, 3);
    if (rc != SOCSCOPE_OK) {
        fprintf(stderr, "player: the dictionary was refused\n");
        return 1;
    }

    count(13, socscope_thread_create(agent, 0, PID_DEMUX, "demux"));
    count(13, socscope_thread_create(agent, 0, PID_VIDEO, "video"));
    count(13, socscope_thread_create(agent, 0, PID_AUDIO, "audio"));
    count(9, socscope_marker(agent, 0, "play: channel 1"));
    uint64_t buffer = 200000;
    for (unsigned frame = 0; frame < frames; frame++) {
        run_as(PID_DEMUX);
        size_t size = demux(frame);
        buffer = buffer + size > 400000 ? 400000 : buffer + size;
        socscope_value level = socscope_unsigned(buffer);
        count(T_BUFFER_LEVEL, socscope_record(agent, 0, T_BUFFER_LEVEL, &level, 1));
        count(8, socscope_wakeup(agent, 0, PID_VIDEO));
        run_as(PID_VIDEO);
        decode_video(frame, size);
        buffer -= size / 2;
        run_as(PID_AUDIO);
        count(11, socscope_user_entry(agent, 0, (uint64_t)(uintptr_t)&spin_us));
        spin_us(30);
        count(12, socscope_user_exit(agent, 0));
        run_as(PID_PLAYER);
        render(frame);
        if (frame % 100 == 99) {
            count(9, socscope_marker(agent, 0, "zap: next channel"));
        }
        rc = socscope_poll(agent, send_frame, &fd);
        if (rc != SOCSCOPE_OK) {
            fprintf(stderr, "player: socscope_poll: %d\n", rc);
            return 1;
        }
    }
    count(9, socscope_marker(agent, 0, "stop"));
    count(14, socscope_thread_exit(agent, 0, PID_AUDIO));
    rc = socscope_finish(agent, send_frame, &fd);
    if (rc != SOCSCOPE_OK) {
        fprintf(stderr, "player: socscope_finish: %d\n", rc);
        return 1;
    }
    socscope_stats stats;
    socscope_get_stats(agent, &stats);
    unsigned long long total = 0;
    for (int t = 0; t < 128; t++) {
        total += calls[t];
        if (calls[t] > 0) {
            printf("player: type %d stored %llu\n", t, calls[t]);
        }
    }
    printf("player: records %llu dropped %llu agent_records %llu agent_dropped %llu frames %llu bytes %llu\n",
           total, dropped_calls, (unsigned long long)stats.records,
           (unsigned long long)stats.dropped, (unsigned long long)stats.frames,
           (unsigned long long)stats.bytes);
    close(fd);
    return 0;
}
