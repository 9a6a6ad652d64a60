#include "common/clock.h"

#include <time.h>

#include <cstdio>

namespace space {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

}  // namespace

int64_t WallNowMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int64_t MonoNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string FormatRfc3339(int64_t epoch_ms) {
  time_t secs = static_cast<time_t>(epoch_ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(epoch_ms % 1000));
  return buf;
}

Result<int64_t> ParseRfc3339Utc(std::string_view t) {
  auto bad = [] { return InvalidArgument("must be an RFC 3339 UTC time like \"2026-12-01T00:00:00Z\""); };
  if (t.size() < 20 || t.size() > 30 || t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' ||
      t.back() != 'Z') {
    return bad();
  }
  auto num = [&](size_t pos, size_t len, int* out) {
    int v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (!IsDigit(t[i])) return false;
      v = v * 10 + (t[i] - '0');
    }
    *out = v;
    return true;
  };
  int year, mon, day, hour, min, sec;
  if (!num(0, 4, &year) || !num(5, 2, &mon) || !num(8, 2, &day) || !num(11, 2, &hour) || !num(14, 2, &min) ||
      !num(17, 2, &sec)) {
    return bad();
  }
  int ms = 0;
  if (t.size() > 20) {
    // ".d{1,9}Z": keep the first three digits as milliseconds.
    std::string_view frac = t.substr(19, t.size() - 20);
    if (frac.size() < 2 || frac.size() > 10 || frac[0] != '.') return bad();
    frac.remove_prefix(1);
    for (size_t i = 0; i < frac.size(); ++i) {
      if (!IsDigit(frac[i])) return bad();
      if (i < 3) ms = ms * 10 + (frac[i] - '0');
    }
    for (size_t i = frac.size(); i < 3; ++i) ms *= 10;
  }
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (year < 1970 || mon < 1 || mon > 12 || day < 1 || day > kDays[mon - 1] + (mon == 2 && leap) || hour > 23 ||
      min > 59 || sec > 59) {
    return InvalidArgument("is not a valid UTC date and time");
  }
  int64_t days = DaysFromCivil(year, static_cast<unsigned>(mon), static_cast<unsigned>(day));
  return ((days * 24 + hour) * 60 + min) * 60000 + int64_t{sec} * 1000 + ms;
}

}  // namespace space
