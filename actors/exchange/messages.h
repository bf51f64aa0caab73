/*
 * Message types exchanged by the node's actors. Every message is an
 * ro_msg_t embedded in the struct of the actor that sends it (or, for
 * actions, of the shard that receives them), so the hot path allocates
 * nothing: a shard has exactly one message in flight at a time.
 */
#ifndef RO_MESSAGES_H
#define RO_MESSAGES_H

enum ro_msg_type {
    RO_MSG_START = 1,   /* node -> env actor: reset your envs and report */
    RO_MSG_ACTIONS,     /* learner -> env actor: actions are in your buffer */
    RO_MSG_OBS_READY,   /* env actor -> learner: observations are in my buffer */
    RO_MSG_SHARD_DONE,  /* env actor -> learner: I stepped my last step */
    RO_MSG_TICK,        /* timer -> learner: a max-wait deadline may have passed */
    RO_MSG_LANE_DONE,   /* learner -> node: every shard of mine is done */
    RO_MSG_STOP,        /* remote hub -> env actor: finish without stepping */
    RO_MSG_RESEED,      /* remote hub -> env actor: reset (reseed) instead of stepping */
    RO_MSG_POLICY,      /* node -> learner lane: switch to the policy in swap_to */
    RO_MSG_POLICY_DONE, /* learner lane -> node: switched (or could not) */
    /* recorder -> env actor: a chunk is yours; record the step, then report */
    RO_MSG_RECORD_RESUME,
    RO_MSG_RECORD_FAILED, /* recorder -> node: a write failed (--record-error stop) */
    RO_MSG_SEGMENT,       /* env actor -> stream hub: a full trajectory segment */
    RO_MSG_STREAM_RESUME, /* segment pool -> env actor: a segment is yours; fill it */
};

#endif
