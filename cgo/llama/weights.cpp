// Reads and writes the weights of a loaded model. llama.cpp has no public API for this:
// llama_model (src/llama-model.h) lists every weight tensor in tensors_by_name, and the
// data moves through ggml's backend interface, so weights in device memory work the same
// as weights on the CPU. Nothing here throws; errors are return codes the Go side words.

#include <cstring>

#include "ggml-backend.h"
#include "llama-model.h"

extern "C" {

// umad_weight_info counts the tensors named name (a tied embedding is held twice, for the
// input and the output layer, when they sit in different buffers) and fills the first
// one's type, four dims and byte size. It returns -1 when the copies disagree.
int umad_weight_info(const struct llama_model *m, const char *name, int32_t *type, int64_t *ne, size_t *nbytes) {
	int n = 0;
	for (const auto &e : m->tensors_by_name) {
		if (std::strcmp(e.first.c_str(), name) != 0) {
			continue;
		}
		const ggml_tensor *t = e.second;
		if (n == 0) {
			*type = t->type;
			for (int d = 0; d < 4; d++) {
				ne[d] = t->ne[d];
			}
			*nbytes = ggml_nbytes(t);
		} else if (*type != t->type || *nbytes != ggml_nbytes(t) || std::memcmp(ne, t->ne, sizeof(t->ne)) != 0) {
			return -1;
		}
		n++;
	}
	return n;
}

// allocated says whether the tensor has memory ggml can write: ggml aborts otherwise.
static bool allocated(const ggml_tensor *t) {
	return t->buffer != nullptr && t->data != nullptr && t->view_src == nullptr;
}

// umad_weight_set copies size bytes into every tensor named name. It returns the number
// of tensors written, or -1 when one of them has another size or no memory (then none
// has been written).
int umad_weight_set(struct llama_model *m, const char *name, const void *data, size_t size) {
	int n = 0;
	for (const auto &e : m->tensors_by_name) {
		if (std::strcmp(e.first.c_str(), name) == 0) {
			if (!allocated(e.second) || ggml_nbytes(e.second) != size) {
				return -1;
			}
			n++;
		}
	}
	for (const auto &e : m->tensors_by_name) {
		if (std::strcmp(e.first.c_str(), name) == 0) {
			ggml_backend_tensor_set(e.second, data, 0, size);
		}
	}
	return n;
}

// readable says whether ggml can copy the tensor out: a plain CPU, host or device buffer.
// CPU buffers that repack weights for faster kernels have no read-back (ggml would call
// a null function), nor do some split buffers.
static bool readable(const ggml_tensor *t) {
	if (!allocated(t)) {
		return false;
	}
	ggml_backend_buffer_type_t buft = ggml_backend_buffer_get_type(t->buffer);
	if (buft == ggml_backend_cpu_buffer_type()) {
		return true;
	}
	ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
	return dev != nullptr && (buft == ggml_backend_dev_buffer_type(dev) || buft == ggml_backend_dev_host_buffer_type(dev));
}

// umad_weight_get copies the first tensor named name into data (size bytes). It returns 1,
// 0 when there is no such tensor, -1 on a size mismatch and -2 when the tensor's buffer
// cannot be read back.
int umad_weight_get(const struct llama_model *m, const char *name, void *data, size_t size) {
	for (const auto &e : m->tensors_by_name) {
		if (std::strcmp(e.first.c_str(), name) != 0) {
			continue;
		}
		if (ggml_nbytes(e.second) != size) {
			return -1;
		}
		if (!readable(e.second)) {
			return -2;
		}
		ggml_backend_tensor_get(e.second, data, 0, size);
		return 1;
	}
	return 0;
}

}  // extern "C"
