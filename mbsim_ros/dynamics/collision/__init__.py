"""Contact points between the collision shapes of links: the collision detection of the contact solver.

compile_geoms(models, compiled) turns every collision Shape into a geom (flat buffers gf/gi,
views `Geoms`) and filters the candidate pairs once. collide(g, c, link_R, link_p, margin),
called from numba code once per step, writes the contacts into a `Contacts` workspace:

  pair a, b    geoms pairs[p, 0] < pairs[p, 1]: a and b in the order of the pairs array
  normal       world unit vector from b into a: moving a along +normal separates the pair
  depth        penetration along the normal (> 0); with margin > 0 gaps down to -margin too
  point        world point midway between the two surfaces
  mu           min(friction_a, friction_b);  restitution  e_a * e_b  (DART's rules)

Narrow phase (every routine writes the normal from its b into its a):
  plane vs anything    the other shape's candidate surface points under the plane (box
                       corners, capsule end spheres, cylinder/cone rims sampled, mesh vertices)
  sphere, capsule      closest points of their core point/segment (two points for parallel
                       capsules); sphere-box in closed form inside and outside the box
  box-box              separating axis test over the 15 axes, then feature clipping
  everything else      GJK distance between the cores (a sphere is its centre and a capsule
                       its segment, inflated by the radius afterwards), EPA when the cores
                       overlap, then feature clipping.
Feature clipping (the multi-point manifold): each shape's "feature" facing the other (the face,
edge or vertex of a box or mesh, a cylinder's cap rim sampled or its side line, a capsule's
segment) within FEATURE_SIN of the normal; the smaller feature is clipped to the larger one's
prism along the normal and every clipped point gets its own depth against the larger one's
plane, as ODE's dBoxBox does for faces. At most MAX_MANIFOLD points are kept per pair: the
deepest and then those spanning the largest area.

The modules, by job:
  layout      shape kinds, limits, the Geoms and Contacts buffers (carve_geoms, carve_contacts)
  geoms       compile_geoms, GeomSet, contacts_list: the Python side
  vectors     3-vectors as tuples and geom records, for every routine below
  manifold    contact candidates and the at most MAX_MANIFOLD points kept per pair
  features    support points, contact features and feature clipping
  primitives  plane vs anything, spheres and capsules, sphere-box, box-box
  gjk_epa     any convex pair: GJK, EPA, then feature clipping
  collide     the pass: broad phase, each pair's routine, the contacts (collide, collide_kernel)
"""
