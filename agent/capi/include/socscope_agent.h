/* socscope_agent.h: the socscope on-board agent for C programs.
 *
 * Link with the static library libsocscope_agent_capi.a (agent/capi; README "The agent from C"). The agent
 * records events into per-CPU rings in memory you provide, never allocates, never blocks, and counts
 * exactly what it has to drop; you drain it into any transport (TCP socket, UART, file) with a callback.
 *
 * Record and drain calls may come from any context (threads, interrupts): each record masks interrupts
 * (PRIMASK on Cortex-M; a global mutex on a host) for that record only, and a drain only to claim a
 * finished block. A drain called while another runs returns SOCSCOPE_ERR_WOULD_BLOCK. Set-up calls
 * (init, register, set_mode) come before any other.
 * Strings given to socscope_agent_init, socscope_register_producer and socscope_register_type are not
 * copied and must outlive the agent (string literals do); record strings are copied.
 *
 * tests/c_player.rs (agent/capi) checks every declaration here against the Rust signatures in src/lib.rs,
 * so the two cannot drift.
 */
#ifndef SOCSCOPE_AGENT_H
#define SOCSCOPE_AGENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2: post-mortem mode (socscope_set_mode, socscope_agent_dump, socscope_stats.overwritten), and
 * records from any context (interrupts included) without a lock of yours. */
#define SOCSCOPE_AGENT_API_VERSION 2

/* Memory socscope_agent_init needs at most on any target (socscope_agent_size() gives this build's exact
 * figure), and its alignment. */
#define SOCSCOPE_AGENT_SIZE 32768
#define SOCSCOPE_AGENT_ALIGN 8

/* Rings: 4 CPUs, 8 blocks of 256 bytes each; 64 producers and 32 custom event types. */
#define SOCSCOPE_CPUS 4
#define SOCSCOPE_BLOCK 256
#define SOCSCOPE_BLOCKS 8
#define SOCSCOPE_PRODUCERS 64
#define SOCSCOPE_TYPES 32

/* Status codes: record functions return SOCSCOPE_STORED or SOCSCOPE_DROPPED, others SOCSCOPE_OK; errors
 * are negative. */
#define SOCSCOPE_OK 0
#define SOCSCOPE_STORED 0
#define SOCSCOPE_DROPPED 1
#define SOCSCOPE_ERR_NULL (-1)
#define SOCSCOPE_ERR_NOT_INITIALISED (-2)
#define SOCSCOPE_ERR_MEMORY (-3)
#define SOCSCOPE_ERR_UTF8 (-4)
#define SOCSCOPE_ERR_DICTIONARY_FULL (-5)
#define SOCSCOPE_ERR_NAME_TOO_LONG (-6)
#define SOCSCOPE_ERR_TOO_MANY_PARAMS (-7)
#define SOCSCOPE_ERR_RESERVED_TYPE (-8)
#define SOCSCOPE_ERR_DUPLICATE_TYPE (-9)
#define SOCSCOPE_ERR_UNKNOWN_TYPE (-10)
#define SOCSCOPE_ERR_PARAM_MISMATCH (-11)
#define SOCSCOPE_ERR_BAD_CPU (-12)
#define SOCSCOPE_ERR_RECORD_TOO_LARGE (-13)
#define SOCSCOPE_ERR_BAD_ARGUMENT (-14)
#define SOCSCOPE_ERR_WOULD_BLOCK (-15)
#define SOCSCOPE_ERR_CLOSED (-16)
#define SOCSCOPE_ERR_DECLARATION_TOO_LARGE (-17)

/* What a full ring does (socscope_set_mode). */
#define SOCSCOPE_MODE_STREAM 0
#define SOCSCOPE_MODE_POST_MORTEM 1

/* What a socscope_write_fn returns. */
#define SOCSCOPE_WRITE_OK 0
#define SOCSCOPE_WRITE_WOULD_BLOCK 1

/* Producer kinds (socscope_register_producer). */
#define SOCSCOPE_PRODUCER_PROCESS 0
#define SOCSCOPE_PRODUCER_THREAD 1
#define SOCSCOPE_PRODUCER_IRQ 2
#define SOCSCOPE_PRODUCER_SOFTIRQ 3
#define SOCSCOPE_PRODUCER_CPU 4

/* Event type categories (socscope_register_type). */
#define SOCSCOPE_CATEGORY_PUNCTUAL 0
#define SOCSCOPE_CATEGORY_STATE_ENTER 1
#define SOCSCOPE_CATEGORY_STATE_EXIT 2
#define SOCSCOPE_CATEGORY_VARIABLE 3

/* Parameter types. */
#define SOCSCOPE_PARAM_SIGNED 0
#define SOCSCOPE_PARAM_UNSIGNED 1
#define SOCSCOPE_PARAM_FLOAT 2
#define SOCSCOPE_PARAM_STRING 3
#define SOCSCOPE_PARAM_ADDRESS 4

/* The first id of custom event types. */
#define SOCSCOPE_FIRST_CUSTOM_TYPE 64

typedef struct socscope_agent socscope_agent;

/* The board's time, in ticks of socscope_config.tick_rate_hz. */
typedef uint64_t (*socscope_clock_fn)(void *user);

/* Sends one whole frame; returns SOCSCOPE_WRITE_OK, SOCSCOPE_WRITE_WOULD_BLOCK (the frame stays queued),
 * or anything else for a closed link. */
typedef int (*socscope_write_fn)(void *user, const uint8_t *frame, size_t len);

typedef struct socscope_config {
    const char *board;       /* board name; the collector names the trace after it */
    const char *soc;         /* system on chip */
    const char *os;          /* operating system */
    const char *application; /* traced application */
    const char *token;       /* shared secret the collector requires, or NULL / "" */
    uint16_t cpu_count;      /* CPUs that record, 1 to SOCSCOPE_CPUS */
    uint64_t tick_rate_hz;        /* clock ticks per second */
    uint64_t session_id;     /* tells this session from earlier ones */
    uint64_t flush_latency_ticks; /* a partly filled block is sent once its first record is this old */
    uint64_t heartbeat_ticks;     /* a heartbeat after this long without another frame */
    uint64_t hello_every_ticks;   /* Hello and the dictionary again this often (0: only at the start) */
} socscope_config;

typedef struct socscope_param {
    const char *name;
    uint32_t type; /* SOCSCOPE_PARAM_* */
} socscope_param;

/* One value of a record; `type` says which field is read. */
typedef struct socscope_value {
    uint32_t type;  /* SOCSCOPE_PARAM_* */
    int64_t i;      /* SOCSCOPE_PARAM_SIGNED */
    uint64_t u;     /* SOCSCOPE_PARAM_UNSIGNED, SOCSCOPE_PARAM_ADDRESS */
    double f;       /* SOCSCOPE_PARAM_FLOAT */
    const char *s;  /* SOCSCOPE_PARAM_STRING: NUL-terminated UTF-8 */
} socscope_value;

typedef struct socscope_stats {
    uint64_t records;           /* records accepted into the rings */
    uint64_t dropped;           /* records dropped because a ring was full (reported in Loss frames) */
    uint64_t rejected;          /* records refused as invalid */
    uint64_t clock_regressions; /* records whose timestamp went backwards on their CPU */
    uint64_t frames;            /* frames written to the transport */
    uint64_t bytes;             /* bytes written to the transport */
    uint64_t overwritten;       /* records overwritten in post-mortem mode before a dump sent them */
} socscope_stats;

/* Setting up. */
size_t socscope_agent_size(void);
int socscope_agent_init(void *memory, size_t size, const socscope_config *config, socscope_clock_fn clock,
                        void *clock_user, socscope_agent **agent);
int socscope_register_producer(socscope_agent *agent, uint32_t id, int64_t parent, uint32_t kind,
                               uint64_t local_id, const char *name);
int socscope_register_type(socscope_agent *agent, uint16_t id, const char *name, uint32_t category,
                           uint16_t enter, const socscope_param *params, size_t count);

/* Recording: the built-in record kinds, then any declared type. */
int socscope_context_switch(socscope_agent *agent, uint16_t cpu, uint32_t prev, uint32_t next);
int socscope_irq_entry(socscope_agent *agent, uint16_t cpu, uint32_t irq);
int socscope_irq_exit(socscope_agent *agent, uint16_t cpu);
int socscope_softirq_entry(socscope_agent *agent, uint16_t cpu, uint64_t handler);
int socscope_softirq_exit(socscope_agent *agent, uint16_t cpu);
int socscope_syscall_entry(socscope_agent *agent, uint16_t cpu, uint32_t nr, uint64_t a0, uint64_t a1,
                           uint64_t a2, uint64_t a3);
int socscope_syscall_exit(socscope_agent *agent, uint16_t cpu, uint32_t nr, int64_t ret);
int socscope_wakeup(socscope_agent *agent, uint16_t cpu, uint32_t pid);
int socscope_marker(socscope_agent *agent, uint16_t cpu, const char *text);
int socscope_mark(socscope_agent *agent, uint16_t cpu, uint64_t id);
int socscope_user_entry(socscope_agent *agent, uint16_t cpu, uint64_t address);
int socscope_user_exit(socscope_agent *agent, uint16_t cpu);
int socscope_thread_create(socscope_agent *agent, uint16_t cpu, uint32_t pid, const char *name);
int socscope_thread_exit(socscope_agent *agent, uint16_t cpu, uint32_t pid);
int socscope_kmalloc(socscope_agent *agent, uint16_t cpu, uint64_t size, uint64_t ptr);
int socscope_kfree(socscope_agent *agent, uint16_t cpu, uint64_t ptr);
int socscope_record(socscope_agent *agent, uint16_t cpu, uint16_t type_id, const socscope_value *values,
                    size_t count);

/* Draining into a transport, and the counters. */
int socscope_poll(socscope_agent *agent, socscope_write_fn write, void *user);
int socscope_flush(socscope_agent *agent, socscope_write_fn write, void *user);
int socscope_finish(socscope_agent *agent, socscope_write_fn write, void *user);
int socscope_restart_session(socscope_agent *agent);
int socscope_set_mode(socscope_agent *agent, uint32_t mode);
int socscope_agent_dump(socscope_agent *agent, socscope_write_fn write, void *user);
int socscope_get_stats(socscope_agent *agent, socscope_stats *stats);

/* The Refusal frame a collector sends before closing a link it will not store (wrong token, full disk...):
   decodes the bytes read back from the socket in place. reason: 1 token, 2 session limit, 3 store,
   4 wire version, 5 connection limit. message: UTF-8 inside bytes, not NUL-terminated. */
#define SOCSCOPE_ERR_NOT_A_REFUSAL (-18)
int socscope_decode_refusal(uint8_t *bytes, size_t len, uint8_t *reason, const uint8_t **message,
                            size_t *message_len);

/* Values for socscope_record. */
static inline socscope_value socscope_signed(int64_t v) {
    socscope_value x = {SOCSCOPE_PARAM_SIGNED, v, 0, 0.0, NULL};
    return x;
}
static inline socscope_value socscope_unsigned(uint64_t v) {
    socscope_value x = {SOCSCOPE_PARAM_UNSIGNED, 0, v, 0.0, NULL};
    return x;
}
static inline socscope_value socscope_float(double v) {
    socscope_value x = {SOCSCOPE_PARAM_FLOAT, 0, 0, v, NULL};
    return x;
}
static inline socscope_value socscope_string(const char *v) {
    socscope_value x = {SOCSCOPE_PARAM_STRING, 0, 0, 0.0, v};
    return x;
}
static inline socscope_value socscope_address(uint64_t v) {
    socscope_value x = {SOCSCOPE_PARAM_ADDRESS, 0, v, 0.0, NULL};
    return x;
}

#ifdef __cplusplus
}
#endif

#endif /* SOCSCOPE_AGENT_H */
