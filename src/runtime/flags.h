/*
 * The one command-line parser of rollout-node, rollout-learner and
 * rollout-replay. Each program describes its flags in a table (ro_flag_t):
 * name, value kind and bounds, where the value goes in its config struct,
 * and the help text. ro__flags_parse checks every value strictly and
 * answers a bad one with one line naming the flag, the value and what is
 * accepted; ro__flags_usage prints the table as --help.
 *
 * Main thread; the parser uses getopt_long, whose state is global.
 */
#ifndef RO_FLAGS_H
#define RO_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum ro_flag_kind {
    RO_FLAG_SECTION = 0, /* not a flag: a heading in --help */
    RO_FLAG_BOOL,        /* no value: sets a bool to true */
    RO_FLAG_U32,         /* a decimal integer in [lo, hi] into a uint32_t */
    RO_FLAG_U64,         /* a decimal integer in [lo, hi] into a uint64_t */
    RO_FLAG_SECONDS,     /* a finite number of seconds >= lo ms into a double */
    RO_FLAG_STRING,      /* a non-empty string into a const char * (points into argv) */
    RO_FLAG_CHOICE,      /* one of choices[] into an int: its index */
    RO_FLAG_FN,          /* parse(field, value, ...) does it (repeatable flags, lists) */
} ro_flag_kind_t;

/* A custom value parser: field is the config struct's address plus the
 * flag's offset. Returns 0 or RO_EINVAL with one line in err. */
typedef int (*ro_flag_parse_fn)(void *field, const char *value, char *err, size_t errlen);

typedef struct ro_flag {
    ro_flag_kind_t kind;
    const char *name;           /* without the dashes; for a section, its heading */
    const char *value;          /* the value name in --help ("N"); NULL: the flag takes no value */
    size_t offset;              /* of the field in the config struct */
    uint64_t lo, hi;            /* integer bounds; RO_FLAG_SECONDS: lo in ms */
    const char *const *choices; /* RO_FLAG_CHOICE: NULL-terminated */
    ro_flag_parse_fn parse;     /* RO_FLAG_FN */
    const char *help;           /* '\n' starts a continuation line */
} ro_flag_t;

/*
 * ro__flags_parse parses argv against flags[0..n) into cfg. given (n
 * entries, or NULL) tells which flags appeared. Operands (arguments that are
 * not flags) are refused unless operands is not NULL: then *operands is the
 * index of the first one in argv (argc if none). Returns 0 or RO_EINVAL with
 * one line in err.
 */
int ro__flags_parse(const ro_flag_t *flags, size_t n, void *cfg, bool *given, int argc, char **argv,
                    int *operands, char *err, size_t errlen);

/* ro__flags_given tells whether the flag called name (not a section) was
 * given, from the given[] that ro__flags_parse filled for flags[0..n). */
bool ro__flags_given(const ro_flag_t *flags, size_t n, const bool *given, const char *name);

/* RO_FLAGS_HELP_VERSION(type) is the two rows every program's table ends
 * with: --help and --version into type's bool fields help and version. */
#define RO_FLAGS_HELP_VERSION(type)                                                                \
    {RO_FLAG_BOOL, "help", NULL, offsetof(type, help), .help = "this text"},                       \
    {                                                                                              \
        RO_FLAG_BOOL, "version", NULL, offsetof(type, version), .help = "the version"              \
    }

/* ro__flags_answer answers --help (usage(stdout)) or else --version
 * ("program version_text" on stdout) when help or version is set, and
 * says whether it did: the program then exits 0. */
bool ro__flags_answer(bool help, bool version, void (*usage)(FILE *f), const char *program,
                      const char *version_text);

/* ro__flags_usage writes `head` (the usage line and what the program does),
 * then one line per flag, aligned, with the sections as headings. */
void ro__flags_usage(FILE *f, const char *head, const ro_flag_t *flags, size_t n);

/* Strict value parsers, for custom flags. flag names the flag in messages
 * ("--steps"). An integer is the whole string, decimal, no sign. */
int ro__flag_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out,
                 char *err, size_t errlen);
int ro__flag_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi, uint32_t *out,
                 char *err, size_t errlen);
/* A finite number of seconds >= 0. */
int ro__flag_seconds(const char *flag, const char *s, double *out, char *err, size_t errlen);
/* One of choices (NULL-terminated): *index gets its position; else the
 * line "FLAG 'S': expected A, B or C". */
int ro__flag_choice(const char *flag, const char *s, const char *const *choices, int *index,
                    char *err, size_t errlen);

#endif
