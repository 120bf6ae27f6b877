#include <vector>

namespace geometry {

template <typename T>
class Polygon : public Shape {
 public:
  explicit Polygon(std::vector<T> points) : points_(points) {}

  T area() const {
    T sum = 0;
    auto cross = [&](const T& a, const T& b) {
      return a.x * b.y - a.y * b.x;
    };
    for (size_t i = 0; i < points_.size(); ++i) {
      sum += cross(points_[i], points_[(i + 1) % points_.size()]);
    }
    return sum / 2;
  }

 private:
  std::vector<T> points_;
};

}  // namespace geometry
