/*
 * Memory maps for the Python backend's shared-memory files (src/backends/python/shm.ts).
 *
 * Node has no mmap, so without this addon Serval moves tensors through the stub's files with
 * pread/pwrite: a system call and a page-cache lookup per 4 KiB page on every request. With it
 * the server maps the same files the stub maps and copies with memcpy. Three calls:
 *
 *   map(fd, length)          an ArrayBuffer over a MAP_SHARED mapping of the file's first bytes
 *   unmap(arrayBuffer)       detaches it (every view over it becomes empty) and unmaps it
 *   reserve(fd, at, length)  gives the range its pages now (posix_fallocate), so a full /dev/shm
 *                            is an ENOSPC error here rather than a SIGBUS at the first store
 *
 * Only Node-API (C, stable ABI): it builds against the headers that ship with node.
 */
#define NAPI_VERSION 8
#include <node_api.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define CHECK(env, call)                                                                                \
  do {                                                                                                  \
    if ((call) != napi_ok) {                                                                            \
      napi_throw_error((env), NULL, "serval_mmap: " #call " failed");                                   \
      return NULL;                                                                                      \
    }                                                                                                   \
  } while (0)

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char text[256];
  snprintf(text, sizeof text, "%s: %s", what, strerror(err));
  napi_value message, error, code;
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, NULL, message, &error);
  const char *name = err == ENOSPC ? "ENOSPC" : err == ENOMEM ? "ENOMEM" : err == EBADF ? "EBADF" : "EIO";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_throw(env, error);
  return NULL;
}

static int number_arg(napi_env env, napi_value v, int64_t *out) {
  napi_valuetype type;
  if (napi_typeof(env, v, &type) != napi_ok || type != napi_number) return 0;
  return napi_get_value_int64(env, v, out) == napi_ok && *out >= 0;
}

/* The mapping's length travels as the finalizer's hint; the finalizer is the only munmap. */
static void finalize_map(napi_env env, void *data, void *hint) {
  (void)env;
  munmap(data, (size_t)(uintptr_t)hint);
}

static napi_value map_file(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, length;
  if (argc < 2 || !number_arg(env, argv[0], &fd) || !number_arg(env, argv[1], &length)) {
    napi_throw_type_error(env, NULL, "map(fd, length): two non-negative integers");
    return NULL;
  }
  napi_value result;
  if (length == 0) {
    void *unused;
    CHECK(env, napi_create_arraybuffer(env, 0, &unused, &result));
    return result;
  }
  void *data = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
  if (data == MAP_FAILED) return throw_errno(env, "mmap", errno);
  if (napi_create_external_arraybuffer(env, data, (size_t)length, finalize_map, (void *)(uintptr_t)length, &result) !=
      napi_ok) {
    munmap(data, (size_t)length);
    napi_throw_error(env, NULL, "serval_mmap: cannot wrap the mapping in an ArrayBuffer");
    return NULL;
  }
  return result;
}

static napi_value unmap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  bool is_buffer = false, detached = false;
  if (argc < 1 || napi_is_arraybuffer(env, argv[0], &is_buffer) != napi_ok || !is_buffer) {
    napi_throw_type_error(env, NULL, "unmap(arrayBuffer): an ArrayBuffer from map()");
    return NULL;
  }
  CHECK(env, napi_is_detached_arraybuffer(env, argv[0], &detached));
  /* Detaching drops V8's hold on the memory, which runs finalize_map (the munmap). */
  if (!detached) CHECK(env, napi_detach_arraybuffer(env, argv[0]));
  return NULL;
}

static napi_value reserve(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, at, length;
  if (argc < 3 || !number_arg(env, argv[0], &fd) || !number_arg(env, argv[1], &at) || !number_arg(env, argv[2], &length)) {
    napi_throw_type_error(env, NULL, "reserve(fd, at, length): three non-negative integers");
    return NULL;
  }
  if (length == 0) return NULL;
  int err = posix_fallocate((int)fd, (off_t)at, (off_t)length);
  /* A file system without fallocate: nothing to reserve ahead, stores fault pages in as before. */
  if (err != 0 && err != EOPNOTSUPP && err != ENOSYS) return throw_errno(env, "posix_fallocate", err);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"map", NULL, map_file, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unmap", NULL, unmap, NULL, NULL, NULL, napi_enumerable, NULL},
      {"reserve", NULL, reserve, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  CHECK(env, napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE_INIT() { return init(env, exports); }
