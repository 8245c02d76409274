// llama.cpp splits text for BPE with std::regex, whose matcher recurses once per character
// of a match: a long run of letters, punctuation or spaces overflows an ordinary thread
// stack. umad_tokenize runs llama_tokenize on a thread of its own with a stack sized for
// the text (reserved address space; pages are touched only as deep as the recursion goes).
#include <pthread.h>
#include <stdint.h>
#include "llama.h"

struct umad_tokenize_call {
    const struct llama_vocab *vocab;
    const char *text;
    int32_t text_len;
    llama_token *tokens;
    int32_t n_tokens_max;
    bool add_special, parse_special;
    int32_t result;
};

static void *umad_tokenize_main(void *arg) {
    struct umad_tokenize_call *c = arg;
    c->result = llama_tokenize(c->vocab, c->text, c->text_len, c->tokens, c->n_tokens_max, c->add_special, c->parse_special);
    return NULL;
}

// umad_tokenize returns 0 and sets *result to llama_tokenize's result, or returns the
// pthread error number when the thread could not be started.
int umad_tokenize(const struct llama_vocab *vocab, const char *text, int32_t text_len, llama_token *tokens,
                  int32_t n_tokens_max, bool add_special, bool parse_special, size_t stack_size, int32_t *result) {
    struct umad_tokenize_call c = {vocab, text, text_len, tokens, n_tokens_max, add_special, parse_special, 0};
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0) {
        return rc;
    }
    rc = pthread_attr_setstacksize(&attr, stack_size);
    pthread_t th;
    if (rc == 0) {
        rc = pthread_create(&th, &attr, umad_tokenize_main, &c);
    }
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        rc = pthread_join(th, NULL);
    }
    if (rc == 0) {
        *result = c.result;
    }
    return rc;
}

