/* core/options.h — every option declared once, as redis's config.c declares its
 * settings: name, type, where the value lives, default, valid range or choices,
 * help. The one row sets the default, parses a value from text (the command line,
 * a YAML file), checks the range with a message naming the option, prints
 * `--help` with the default read from the value, and records the value in a
 * checkpoint (opts_to_json).
 *
 * Rows are grouped by the struct they describe (TrainingArgs, GenOpts, RewardArgs,
 * TrainConfig...); a row's offset is relative to its struct, and a command places
 * each group at the offset of that struct inside its own (OptGroup.base), so a
 * group shared by several commands is declared once.
 *
 * Nothing here prints; parse errors come back in a GrpoErr. */
#ifndef GRPO_CORE_OPTIONS_H
#define GRPO_CORE_OPTIONS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/check.h"

typedef enum {
    OPT_BOOL,      /* int: 0 or 1 */
    OPT_INT,       /* int */
    OPT_LONG,      /* long */
    OPT_U64,       /* uint64_t (seeds) */
    OPT_F64,       /* double */
    OPT_F32,       /* float */
    OPT_MIB,       /* size_t bytes, given in MiB */
    OPT_STR,       /* const char *, NULL = unset */
    OPT_ENUM,      /* int: the index of the value in choices[] */
    OPT_LIST,      /* StrList */
    OPT_F64_LIST,  /* F64List */
    OPT_CONFIG,    /* const char *: a YAML file of options, read before the command line */
    OPT_JSON,      /* const char *: a JSON object's text (a YAML mapping in a --config file), NULL = unset */
} OptType;

/* Values of a list option: `--reward_funcs a b c`, or a YAML sequence. */
typedef struct {
    int n;
    const char **v;
} StrList;

typedef struct {
    int n;
    double *v;
} F64List;

enum {
    OPT_REQUIRED = 1 << 0, /* must be set (strings, lists) */
    OPT_UNSET_NAN = 1 << 1, /* numbers: NaN (the default) means unset */
    OPT_NO_RECORD = 1 << 2, /* not recorded in checkpoints (paths of this run, output switches) */
    OPT_MODEL_PATH = 1 << 3, /* strings: a model directory, or a Hub id found in the local Hub cache */
    OPT_DATA_PATH = 1 << 4, /* strings: a local dataset file (a directory: its dataset_train_split file);
                               a Hub id gets a hint to convert it */
    OPT_TEST_SPLIT = 1 << 5, /* with OPT_DATA_PATH: a directory gives its dataset_test_split file */
    OPT_AUTO = 1 << 6,       /* bools: "auto" (-1) is a value too, which the library resolves where it reads it */
    OPT_INPUT = 1 << 7,      /* strings: a file or directory the command reads (as OPT_MODEL_PATH, OPT_DATA_PATH
                                and OPT_CONFIG are): an output directory may not be, hold or lie inside it */
    OPT_OPEN_MAX = 1 << 8,   /* numbers: max itself is outside the range, [min, max) (Adam's betas) */
};
/* The row's --help heading, in bits 16..23 of its flags. */
#define OPT_IN(section) ((unsigned)(section) << 16)
#define OPT_SECTION_OF(flags) ((OptSection)(((flags) >> 16) & 0xFF))

/* The headings `--help` lists options under, in the order printed. A row names its
 * own in its flags (OPT_IN(OPT_SEC_LORA)), else it takes the one of the group it is
 * placed in (OptGroup.section); rows with neither come last, under "options". */
typedef enum {
    OPT_SEC_NONE,
    OPT_SEC_MODEL_DATA,  /* model & data: inputs, outputs, dataset columns and splits */
    OPT_SEC_REWARDS,     /* reward functions and how they become advantages */
    OPT_SEC_GENERATION,  /* prompt and completion lengths, sampling */
    OPT_SEC_LOSS,        /* GRPO's loss, its clipping, KL and reference model */
    OPT_SEC_BATCH,       /* batches and the length of training */
    OPT_SEC_OPTIM,       /* AdamW, schedule, clipping, seed */
    OPT_SEC_EVAL,        /* evaluation during training */
    OPT_SEC_LOG,         /* logging and checkpoints */
    OPT_SEC_LORA,        /* LoRA adapters */
    OPT_SEC_SPEED,       /* precision, memory and speed (no effect on what is computed, bf16 aside) */
    OPT_N_SECTIONS
} OptSection;

/* The heading of each section ("model & data", ...); [OPT_SEC_NONE] is "options". */
extern const char *const opt_section_names[OPT_N_SECTIONS];

typedef struct {
    const char *name;             /* TRL's spelling, without dashes */
    OptType type;
    size_t offset;                /* of the value within the group's struct */
    double def;                   /* default of numbers, bools and enums (an index) */
    const char *def_str;          /* default of strings */
    double min, max;              /* numbers: valid range, inclusive; min > max: none */
    const char *const *choices;   /* OPT_ENUM: NULL-terminated names, value = index */
    const char *const *aliases;   /* OPT_ENUM: NULL-terminated pairs "alias", "choice" */
    unsigned flags;
    const char *help;             /* what it is; the default and range are added by opts_help */
} OptSpec;

/* A group of rows placed at base within a command's options struct. */
typedef struct {
    const OptSpec *specs;
    int n;
    size_t base;
    OptSection section; /* the heading of its rows that name none */
} OptGroup;

#define OPT_GROUP(specs, base) OPT_GROUP_IN(specs, base, OPT_SEC_NONE)
#define OPT_GROUP_IN(specs, base, section) \
    ((OptGroup){(specs), (int)(sizeof(specs) / sizeof((specs)[0])), (base), (section)})
#define OPT_NO_RANGE 1, 0

/* The one --config row, for a command's table: a YAML file of the command's options
 * (a const char * at offset), read before the command line (cli/args.h). */
#define OPT_CONFIG_ROW(offset)                                                                                   \
    {"config", OPT_CONFIG, (offset), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_NO_RECORD | OPT_IN(OPT_SEC_MODEL_DATA), \
     "YAML file of these options (the command line wins)"}

/* The one seed row (uint64_t, default 42), placed wherever a command keeps its seed,
 * under the heading the command gives it. */
extern const OptSpec seed_option[1];
#define SEED_OPTION_GROUP(base, section) ((OptGroup){seed_option, 1, (base), (section)})

/* Sets every option of the groups to its default in the struct at obj. */
void opts_defaults(const OptGroup *g, int ng, void *obj);

/* Finds the row called name[len] (len: its length; name need not be terminated). */
const OptSpec *opts_find(const OptGroup *g, int ng, const char *name, size_t len, size_t *base);

/* Parses text into o's value (lists: a one-element list; text must outlive obj).
 * Errors: "NAME expects an integer, not 'x'", "NAME 'x' is not one of a, b, c". */
/* What transformers' HfArgumentParser takes for a boolean, in any case:
 * yes/true/t/y/1 and no/false/f/n/0. Returns 0 and sets *out, or -1. */
int opt_parse_bool(const char *s, int *out);
int opt_set_text(const OptSpec *o, void *value, const char *text, GrpoErr *err);

/* Range checks and required options, with a message naming the option and the value. */
int opts_check(const OptGroup *g, int ng, const void *obj, GrpoErr *err);

/* The value as text ("1e-06", "true", "dapo", "a b c", "" when unset) into buf. */
void opt_format(const OptSpec *o, const void *value, char *buf, size_t cap);

/* "help (default V; range [a, b])" for --help, reading the default from obj. */
void opt_help(const OptSpec *o, const void *value, char *buf, size_t cap);

/* The options part of --help (new string, the caller frees it): each section's
 * heading, then its rows in the order of the groups and of the rows within them,
 * "  --name ARG   help (default; range)", the help wrapped to lines of at most width
 * columns (a word longer than a line goes on one of its own), defaults read from
 * the struct at obj. One "options:" heading when no row has a section. */
char *opts_help_text(const OptGroup *g, int ng, const void *obj, int width);

/* {"name": value, ...} of every recorded option (new reference). */
json_t *opts_to_json(const OptGroup *g, int ng, const void *obj);

/* The value of o inside the struct at obj placed at base. */
static inline void *opt_value(const OptSpec *o, const void *obj, size_t base) {
    return (char *)obj + base + o->offset;
}

#endif
