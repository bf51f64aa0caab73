/* lane.h: what the files of the Lane share (rollout_client._hotpath.Lane,
 * a VecEnv's send()/recv() over one node's shared memory; lane.c says why
 * and how). lane.c: the type and its methods; lane_state.c: frames in,
 * answers out and the per-env states they move; lane_io.c: the socket and
 * the waits; lane_gather.c: what recv() hands out. Internal to the
 * extension: ro__hp_lane_ names. */
#ifndef RO_HOTPATH_LANE_H
#define RO_HOTPATH_LANE_H

#include "hotpath.h"

#include <sys/types.h>

/* The per-env states of vecenv_async.py. */
enum { IN_FLIGHT = 0, READY = 1, HANDED = 2, HELD = 3 };

/* ANSWER_MAX: an answer's bytes without a hold list; a hold list adds at
 * most HOLD_MAX per env and HOLD_HEAD per frame. */
enum { IN_BASE = 1 << 16, ANSWER_MAX = 24, HOLD_MAX = 3, HOLD_HEAD = 8 };

/* One Observations frame whose answer is not sent yet. */
typedef struct lane_frame {
    uint64_t seq;
    npy_intp left;    /* envs without an action yet */
    npy_intp npairs;  /* (first, count) pairs in ranges */
    uint32_t *ranges; /* owned */
} lane_frame_t;

typedef struct {
    PyObject ob_base; /* PyObject_HEAD */
    /* The socket, memory columns, per-env arrays and spin: kept alive. */
    PyObject *refs;
    PyObject *spin; /* the client's spin.Spin: its policy decides each wait */
    int fd;         /* -1 once detached */
    npy_intp n, d;
    int obs_nd;
    npy_intp obs_dims[NPY_MAXDIMS];
    /* The node's memory: its columns, and this connection's actions. */
    const float *m_obs, *m_final, *m_reward;
    const uint8_t *m_flags;
    const uint64_t *m_step;
    void *m_act;
    int discrete;
    npy_intp act_width;
    int64_t action_n;
    /* VecEnv's per-env arrays (vecenv_async.py reads them for messages). */
    int8_t *state;
    int64_t *frame_of; /* slot in frames while READY, HANDED or HELD; else -1 */
    double *ep_ret;
    int64_t *ep_len;
    /* Frames not answered yet: at most n (each holds an env not IN_FLIGHT). */
    lane_frame_t *frames;
    npy_intp *free_slots, nfree;
    /* READY envs in arrival order: runs of (first, count), a ring of n. */
    uint32_t (*ready)[2];
    npy_intp rhead, rlen, nready, nflight;
    /* Bytes read and not yet taken as frames: in[in_start..in_end). */
    uint8_t *in;
    size_t in_cap, in_start, in_end, max_frame;
    int peer_gone; /* the node closed its end: answers are dropped */
    /* NEXT_STEP (Gymnasium's default autoreset), or NULL (same-step):
     * VecEnv's bool [n], 1 for an env whose transition handed out last
     * ended its episode. Its frame's answer holds it (Actions.hold), so the
     * transition that comes next is its reset step, which recv() counts as
     * no step; recv() shows an ended episode's last observation as the
     * env's row (no final_obs) and sets the mark from the flags. Only this
     * lane writes it while it serves (lane_gather.c, lane_state.c). */
    npy_bool *hold;
    /* Answers not yet written to the socket. */
    uint8_t *out;
    size_t out_len, out_cap;
    uint64_t last_seq;
} Lane;

/* What ro__hp_lane_take_frame made of a frame. */
enum { TOOK = 1, NOT_MINE = 0, BAD = -1, NOMEM = -2 };

/* -- lane_state.c -- */

/* Takes the frame b[0..len) when it is an in-memory Observations frame:
 * checked (seq after the last, ranges, every env in flight), then its
 * envs READY. TOOK; NOT_MINE (another frame: Python's); BAD (msg says
 * why; nothing changed); NOMEM. */
int ro__hp_lane_take_frame(Lane *L, const uint8_t *b, size_t len, char *msg, size_t mlen);

/* Registers a frame of k envs in ranges (npairs pairs, checked) whose envs
 * become `to` (READY: queued for recv(); HANDED: given out already). */
int ro__hp_lane_register(Lane *L, uint64_t seq, const uint32_t *ranges, npy_intp npairs, npy_intp k,
                         int to);

/* Checks a frame's ranges (npairs pairs): each non-empty, inside the
 * node's envs, every env IN_FLIGHT and none twice. Sets *k to the envs.
 * -1 with msg set otherwise; nothing changes either way. */
int ro__hp_lane_check_ranges(Lane *L, uint64_t seq, const uint32_t *rg, npy_intp npairs,
                             npy_intp *k, char *msg, size_t len);

/* Appends the answer of frame `slot` (Frame{actions{seq, in_memory}},
 * length-prefixed; wire.actions_in_memory) and frees the slot: its envs
 * are in flight again. */
void ro__hp_lane_answer(Lane *L, npy_intp slot);

/* -- lane_io.c -- */

/* Seconds on CLOCK_MONOTONIC: the waits' deadlines. */
double ro__hp_lane_now(void);

/* The next complete frame in the input: 1 (its body at *body, *len bytes;
 * taken), 0 (none complete yet), -1 (a bad length prefix; msg set). */
int ro__hp_lane_next(Lane *L, const uint8_t **body, size_t *len, char *msg, size_t mlen);

/* Room to read into: unread bytes moved to the front, the buffer grown
 * for a frame larger than it (to at most max_frame plus its prefix) and
 * shrunk back once it is read. 0, or -1 (no memory). */
int ro__hp_lane_room(Lane *L);

/* Writes what the output holds. 0 (all or some written, or the socket is
 * full), or the errno of a failed send. A peer that closed its end
 * (EPIPE, ECONNRESET) is no error here: what it sent before, a goodbye
 * perhaps, is still to be read, and recv() reports the end with it, as a
 * TCP peer's end shows; answers to it are dropped from then on. */
int ro__hp_lane_flush(Lane *L);

/* One read: >0 bytes, 0 at EOF, -1 nothing now (EAGAIN), -2 an error
 * (errno). */
ssize_t ro__hp_lane_read(Lane *L);

/* Waits until the socket has bytes (or takes the pending answers), at
 * most until `deadline` (ro__hp_lane_now(); < 0: no limit): first spinning as the
 * client's policy allows, then in poll() without the GIL. 1 readable, 0
 * timed out, -1 a Python error (a signal's exception). */
int ro__hp_lane_wait(Lane *L, double deadline);

/* -- lane_gather.c -- */

/* The `want` READY envs next in the ready queue, taken: (obs, reward,
 * terminated, truncated, infos, stepped, ended) as recv() returns the
 * first five; stepped counts the transitions, ended is None or the
 * (returns, lengths) lists of the episodes counted. Rows are in arrival
 * order, with infos["env_id"]; `ordered` (want is every env, each READY
 * once: step()) puts env e's in row e, without env_id. NULL on error. */
PyObject *ro__hp_lane_gather(Lane *L, npy_intp want, int ordered);

#endif
