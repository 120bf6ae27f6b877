#include <stdlib.h>
#include <string.h>

struct buffer {
    char *data;
    size_t length;
    size_t capacity;
};

static int
buffer_grow(struct buffer *buffer,
            size_t wanted)
{
    if (wanted <= buffer->capacity) {
        return 0;
    }
    size_t capacity = buffer->capacity * 2;
    char *data = realloc(buffer->data, capacity);
    if (data == NULL) {
        return -1;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return 0;
}

int buffer_append(struct buffer *buffer, const char *text) {
    size_t length = strlen(text);
    if (buffer_grow(buffer, buffer->length + length) != 0) {
        return -1;
    }
    memcpy(buffer->data + buffer->length, text, length);
    buffer->length += length;
    return 0;
}
