#include "wire/pb_alloc.h"

#include <stdint.h>
#include <stdlib.h>

#include "runtime/error.h"

/* Each block starts with its size, so that free can give it back to the
 * count; 16 bytes keep the payload aligned as malloc's is. */
#define HEADER 16

static void *bounded_alloc(void *data, size_t size)
{
    ro_pb_alloc_t *a = data;
    if (size > SIZE_MAX - HEADER || size + HEADER > a->limit - a->used) {
        a->refused = true;
        return NULL;
    }
    unsigned char *p = malloc(size + HEADER);
    if (!p)
        return NULL;
    *(size_t *)p = size + HEADER;
    a->used += size + HEADER;
    if (a->used > a->peak)
        a->peak = a->used;
    return p + HEADER;
}

static void bounded_free(void *data, void *ptr)
{
    ro_pb_alloc_t *a = data;
    if (!ptr)
        return;
    unsigned char *p = (unsigned char *)ptr - HEADER;
    a->used -= *(size_t *)p;
    free(p);
}

void ro__pb_alloc_init(ro_pb_alloc_t *a, size_t limit)
{
    a->base.alloc = bounded_alloc;
    a->base.free = bounded_free;
    a->base.allocator_data = a;
    a->limit = limit;
    a->used = 0;
    a->peak = 0;
    a->refused = false;
}

bool ro__pb_alloc_refused(ro_pb_alloc_t *a)
{
    bool r = a->refused;
    a->refused = false;
    return r;
}

void ro__pb_alloc_move(ro_pb_alloc_t *dst, ro_pb_alloc_t *src)
{
    *dst = *src;
    dst->base.allocator_data = dst;
    src->used = 0;
}

ProtobufCMessage *ro__pb_unpack(ro_pb_alloc_t *a, size_t limit,
                                const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                size_t n, const char *name, const char *what, char *err,
                                size_t errlen)
{
    ro__pb_alloc_init(a, limit);
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &a->base, n, data);
    if (m)
        return m;
    if (ro__pb_alloc_refused(a))
        ro__errorf(err, errlen, RO_EBADMSG, "%s: %s%sdecodes into more memory than its size allows",
                   name, what ? what : "", what ? " " : "");
    else
        ro__errorf(err, errlen, RO_EBADMSG, "%s: %s%s valid %s message", name, what ? what : "",
                   what ? " is not a" : "not a", desc->short_name);
    return NULL;
}
