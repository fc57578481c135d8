/* pngstat.c — what a screenshot shows, for test_report.sh: `pngstat FILE [#rrggbb...]`
 * prints width=W height=H nonwhite=N (pixels not near white), then for each colour
 * color=#rrggbb count=N (pixels within 8 of it in every channel). Exit 1 if FILE is not a
 * PNG it can read, 2 for bad usage.
 */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: pngstat FILE [#rrggbb...]\n");
    return 2;
  }
  png_image im;
  memset(&im, 0, sizeof(im));
  im.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&im, argv[1])) {
    fprintf(stderr, "pngstat: %s: %s\n", argv[1], im.message);
    return 1;
  }
  im.format = PNG_FORMAT_RGB;
  size_t n = (size_t)im.width * im.height;
  unsigned char *px = malloc(n * 3 + 1);
  if (!px || !png_image_finish_read(&im, NULL, px, 0, NULL)) {
    fprintf(stderr, "pngstat: %s: %s\n", argv[1], px ? im.message : "out of memory");
    free(px);
    png_image_free(&im);
    return 1;
  }
  size_t nonwhite = 0;
  for (size_t i = 0; i < n; i++)
    nonwhite += px[3 * i] < 240 || px[3 * i + 1] < 240 || px[3 * i + 2] < 240;
  printf("width=%u height=%u nonwhite=%zu\n", im.width, im.height, nonwhite);
  for (int a = 2; a < argc; a++) {
    unsigned rgb;
    if (sscanf(argv[a], "#%6x", &rgb) != 1 || strlen(argv[a]) != 7) {
      fprintf(stderr, "pngstat: '%s' is not a #rrggbb colour\n", argv[a]);
      free(px);
      return 2;
    }
    const int want[3] = {(int)(rgb >> 16), (int)(rgb >> 8 & 0xff), (int)(rgb & 0xff)};
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
      int ok = 1;
      for (int c = 0; c < 3; c++) ok &= abs((int)px[3 * i + c] - want[c]) <= 8;
      count += ok;
    }
    printf("color=%s count=%zu\n", argv[a], count);
  }
  free(px);
  return 0;
}
