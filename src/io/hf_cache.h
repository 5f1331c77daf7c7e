/* io/hf_cache.h — Hugging Face Hub ids in place of local paths: a model that a
 * TRL user downloaded with transformers or `hf download` sits in the Hub cache
 * ($HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub) as models--ORG--NAME/snapshots/COMMIT/, the commit
 * named by refs/main (or by refs/REVISION). */
#ifndef GRPO_IO_HF_CACHE_H
#define GRPO_IO_HF_CACHE_H

/* Whether s has the form of a Hub repository id (NAME or ORG/NAME: letters,
 * digits, '-', '_', '.', no leading '.' or '-', at most one '/') and is not an
 * existing path. */
int hf_is_repo_id(const char *s);

/* The Hub cache directory as huggingface_hub computes it (malloc'd). */
char *hf_cache_dir(void);

/* The snapshot directory of the model repo_id at revision ("main" when NULL)
 * in the cache, if it holds a config.json (malloc'd), else NULL. The process
 * remembers each directory it returned with its id, for hf_cache_repo_id_of. */
char *hf_cache_model_dir(const char *repo_id, const char *revision);

/* The Hub id that hf_cache_model_dir resolved to dir in this process (borrowed),
 * or NULL when dir did not come from an id: what a saved file records as the
 * model the user named (PEFT's base_model_name_or_path is the id given to
 * from_pretrained, not the cache's snapshot path). A path given as a path stays
 * a path, the cache's own included. */
const char *hf_cache_repo_id_of(const char *dir);

#endif
